#include "controller/state/job_lifecycle.h"

#include <spdlog/spdlog.h>

#include <atomic>
#include <cassert>

#include "controller/state/job_record.h"

namespace hangar::controller {
namespace {

std::atomic<int64_t> refused{0};

}  // namespace

void JobLifecycle::Admit(JobRecord& j) { j.state = job::JobState::kPending; }

void JobLifecycle::Restore(JobRecord& j, job::JobState stored) {
  // Tasks a preempting job was still stopping are not in the store: their agents report them when
  // they register again (they hold their GPUs until they end), so the job itself waits as pending.
  j.state = stored == job::JobState::kPreempting ? job::JobState::kPending : stored;
}

bool JobLifecycle::Transition(JobRecord& j, job::JobState to, std::string_view flow) {
  if (Status s = job::CheckTransition(j.state, to); !s.ok()) {
    refused.fetch_add(1, std::memory_order_relaxed);
    spdlog::error("job {}: {} (in {}); it stays {}", j.id, s.message(), flow,
                  job::JobStateName(j.state));
    assert(false && "a job state change the state machine refuses");
    return false;
  }
  j.state = to;
  return true;
}

int64_t JobLifecycle::Refused() { return refused.load(std::memory_order_relaxed); }

std::string StoppingReason(uint32_t tasks) {
  return "waiting for " + std::to_string(tasks) + " task" + (tasks == 1 ? "" : "s") +
         " of its previous attempt to checkpoint and stop before it starts again";
}

}  // namespace hangar::controller
