#include "agent/preflight_threads.h"

namespace hangar::agent {

bool PreflightThreads::Start(const std::string& task_id,
                             std::function<void(const std::atomic<bool>& cancel)> run) {
  MutexLock l(mu_);
  for (auto it = runs_.begin(); it != runs_.end();) {
    if (it->second.done->load()) {
      it->second.thread.join();
      it = runs_.erase(it);
    } else {
      ++it;
    }
  }
  if (runs_.count(task_id) || stopped_) return false;
  Flight r;
  r.done = std::make_shared<std::atomic<bool>>(false);
  r.cancel = std::make_shared<std::atomic<bool>>(false);
  r.thread = std::thread([run = std::move(run), done = r.done, cancel = r.cancel] {
    run(*cancel);
    done->store(true);
  });
  runs_.emplace(task_id, std::move(r));
  return true;
}

bool PreflightThreads::Stop(const std::string& task_id) {
  MutexLock l(mu_);
  auto it = runs_.find(task_id);
  if (it == runs_.end() || it->second.done->load()) return false;
  it->second.cancel->store(true);
  return true;
}

void PreflightThreads::StopAll() {
  std::map<std::string, Flight> all;
  {
    MutexLock l(mu_);
    stopped_ = true;
    for (auto& [id, r] : runs_) r.cancel->store(true);
    all.swap(runs_);
  }
  for (auto& [id, r] : all) r.thread.join();  // outside the lock: a run may call Passed
}

void PreflightThreads::Passed(const std::string& task_id, const pb::PreflightReport& report) {
  MutexLock l(mu_);
  passed_[task_id] = report;
}

std::optional<pb::PreflightReport> PreflightThreads::TakePassed(const std::string& task_id) {
  MutexLock l(mu_);
  auto it = passed_.find(task_id);
  if (it == passed_.end()) return std::nullopt;
  pb::PreflightReport report = std::move(it->second);
  passed_.erase(it);
  return report;
}

}  // namespace hangar::agent
