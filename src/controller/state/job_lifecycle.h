// The one door through which a job's state changes. Nothing else in the controller assigns
// JobRecord::state: the flows that move a job (placement, start, requeue, preemption, the end of
// its tasks, cancel, the time limit, a failed staging) call the job table's Move (job_table.h),
// which calls Transition -- it checks the move against the state machine (job/job_state.h)
// first -- and keeps the table's waiting index in step. A move the machine refuses is a bug in a
// flow: the job keeps its state (so the store never records an impossible history), the refusal
// is logged with the job, both states and the flow, and counted; builds with assertions (the
// sanitizer builds) stop on it.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "job/job_state.h"

namespace hangar::controller {

struct JobRecord;

class JobLifecycle {
 public:
  // A job just admitted: pending.
  static void Admit(JobRecord& j);
  // A job read back from the store: the state it was stored in (no move: it is where it was),
  // except that a preempting one is pending (the tasks it waited for are not in the store).
  static void Restore(JobRecord& j, job::JobState stored);
  // Moves `j` to `to` when the state machine allows it; `flow` names the caller for the log
  // ("cancel", "requeue", ...). Returns whether it moved.
  static bool Transition(JobRecord& j, job::JobState to, std::string_view flow);
  // How many moves were refused since the process started.
  static int64_t Refused();
};

// Why a requeued job waits while `tasks` of its previous attempt still stop.
std::string StoppingReason(uint32_t tasks);

}  // namespace hangar::controller
