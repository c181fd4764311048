// The agent's gang preflights in flight (docs/goodput.md, "Gang preflight"), one owner for them:
// each runs on a thread of its own, by task; a task stopped during its preflight cancels it; the
// agent's shutdown cancels and joins them all, and starts no more; a preflight that passed leaves
// its report for the task's launch to carry.
#pragma once

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include "common/mutex.h"
#include "proto/agent.pb.h"

namespace hangar::agent {

namespace pb = ::hangar::agent::v1;

class PreflightThreads {
 public:
  PreflightThreads() = default;
  PreflightThreads(const PreflightThreads&) = delete;
  PreflightThreads& operator=(const PreflightThreads&) = delete;
  ~PreflightThreads() { StopAll(); }

  // Runs `run(cancel)` on a thread of its own for task `task_id` (cancel turns true when it is
  // stopped); threads that have finished are joined first. Nothing is started -- false -- while
  // one runs for that task (a launch sent again is answered when it ends) or after StopAll.
  bool Start(const std::string& task_id, std::function<void(const std::atomic<bool>& cancel)> run)
      HANGAR_EXCLUDES(mu_);
  // Cancels task `task_id`'s preflight; false when none runs for it.
  bool Stop(const std::string& task_id) HANGAR_EXCLUDES(mu_);
  // Cancels every preflight and waits for their threads; none starts after.
  void StopAll() HANGAR_EXCLUDES(mu_);

  // Task `task_id`'s preflight passed with `report`; its launch takes it (TakePassed).
  void Passed(const std::string& task_id, const pb::PreflightReport& report) HANGAR_EXCLUDES(mu_);
  std::optional<pb::PreflightReport> TakePassed(const std::string& task_id) HANGAR_EXCLUDES(mu_);

 private:
  struct Flight {
    std::thread thread;
    std::shared_ptr<std::atomic<bool>> done;
    std::shared_ptr<std::atomic<bool>> cancel;
  };
  Mutex mu_;
  std::map<std::string, Flight> runs_ HANGAR_GUARDED_BY(mu_);  // by task, running or not joined
  std::map<std::string, pb::PreflightReport> passed_ HANGAR_GUARDED_BY(mu_);  // until launched
  bool stopped_ HANGAR_GUARDED_BY(mu_) = false;
};

}  // namespace hangar::agent
