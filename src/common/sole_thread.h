// Work that runs on a thread of its own, one at a time: Start refuses while the last run is still
// going (its result answers the new request too), and joins a finished one before starting the
// next. The agent's GPU validation runs on one.
#pragma once

#include <atomic>
#include <functional>
#include <thread>

#include "common/mutex.h"

namespace hangar {

class SoleThread {
 public:
  SoleThread() = default;
  SoleThread(const SoleThread&) = delete;
  SoleThread& operator=(const SoleThread&) = delete;
  ~SoleThread() { Join(); }

  // Runs `fn` on a new thread; false, and nothing started, while the last run is still going.
  bool Start(std::function<void()> fn) HANGAR_EXCLUDES(mu_) {
    MutexLock l(mu_);
    if (running_) return false;
    if (thread_.joinable()) thread_.join();
    running_ = true;
    thread_ = std::thread([this, fn = std::move(fn)] {
      fn();
      running_ = false;
    });
    return true;
  }
  bool running() const { return running_; }
  // Waits for the last run to end.
  void Join() HANGAR_EXCLUDES(mu_) {
    MutexLock l(mu_);
    if (thread_.joinable()) thread_.join();
  }

 private:
  Mutex mu_;
  std::thread thread_ HANGAR_GUARDED_BY(mu_);
  std::atomic<bool> running_{false};
};

}  // namespace hangar
