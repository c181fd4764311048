// A queue of work between threads: producers Push, one consumer thread takes items in order with
// PopFor, which waits up to a timeout and gives up early once `stop` is set (after WakeAll, at
// once). What the agent's stagers and its MIG thread wait on.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <optional>
#include <utility>

#include "common/mutex.h"

namespace hangar {

template <typename T>
class WorkQueue {
 public:
  void Push(T item) HANGAR_EXCLUDES(mu_) {
    {
      MutexLock l(mu_);
      items_.push_back(std::move(item));
    }
    ready_.notify_one();
  }
  // The oldest item; nullopt when none came within `timeout` or `*stop` is set (then items stay).
  template <typename Rep, typename Period>
  std::optional<T> PopFor(std::chrono::duration<Rep, Period> timeout, const std::atomic<bool>* stop)
      HANGAR_EXCLUDES(mu_) {
    MutexLock l(mu_);
    l.WaitFor(ready_, timeout, [&]() HANGAR_REQUIRES(mu_) { return !items_.empty() || *stop; });
    if (*stop || items_.empty()) return std::nullopt;
    T item = std::move(items_.front());
    items_.pop_front();
    return item;
  }
  // Wakes every PopFor waiting (to see its `stop`).
  void WakeAll() HANGAR_EXCLUDES(mu_) {
    MutexLock l(mu_);
    ready_.notify_all();
  }
  size_t size() const HANGAR_EXCLUDES(mu_) {
    MutexLock l(mu_);
    return items_.size();
  }

 private:
  mutable Mutex mu_;
  std::condition_variable ready_;
  std::deque<T> items_ HANGAR_GUARDED_BY(mu_);
};

}  // namespace hangar
