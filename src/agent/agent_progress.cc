// Training progress from a task (`hangar progress`, through the agent's socket): forwarded to the
// controller, which finds hung jobs and stragglers in it (docs/progress.md).
#include <spdlog/spdlog.h>
#include <unistd.h>

#include "agent/agent.h"

namespace hangar::agent {

namespace {

// A loop may report every step; the controller needs far fewer, and a hang is measured in minutes.
constexpr int64_t kForwardEveryNs = 1'000'000'000;

}  // namespace

Status Agent::OnProgressReport(const ProgressReport& p) {
  pb::AgentMessage m;
  pb::Progress* out = m.mutable_progress();
  bool runs = true;
  {
    MutexLock l(tasks_.mu());
    const TaskRecord* it = tasks_.Find(p.task_id);
    runs = it && !it->ended && runner_.IsRunning(p.task_id);
    if (runs) {
      // As for checkpoints: a task's reports come from its own uid (or root).
      const int64_t owner = it->uid >= 0 ? it->uid : static_cast<int64_t>(geteuid());
      if (p.peer_uid >= 0 && p.peer_uid != 0 && p.peer_uid != owner) {
        return Status::PermissionDenied(
            "task '" + p.task_id + "' runs as uid " + std::to_string(owner) + "; uid " +
            std::to_string(p.peer_uid) + " may not report its progress");
      }
      out->set_job_id(it->job_id);
    }
  }
  if (!runs) {
    link_.ForgetProgress(p.task_id);
    return Status::NotFound("task '" + p.task_id + "' does not run on node " + options_.node);
  }
  if (!link_.ProgressDue(p.task_id, MonotonicNanos(), kForwardEveryNs))
    return Status::Ok();  // taken, not forwarded
  out->set_task_id(p.task_id);
  out->set_time_ms(clock_->Now());
  out->set_step(p.step);
  out->set_step_time_us(p.step_time_us);
  // Not kept while the controller is away: the next report says more than this one.
  (void)link_.Write(m);
  return Status::Ok();
}

}  // namespace hangar::agent
