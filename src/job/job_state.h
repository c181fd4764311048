// The job state machine. Every change of a job's state in the controller goes through
// JobLifecycle::Transition (controller/state/job_lifecycle.h), which refuses moves the machine does
// not allow, so the store never records an impossible history.
//
//   pending --place--> starting --all tasks up--> running --all exit 0--> succeeded
//      ^                  |                          |  \--a task fails--> failed
//      |                  +------- node lost --------+--- preempt --> preempting
//      +--------------- requeue (lost node, preemption, reclaim) -------------+
//   pending --its image cannot be pinned--> failed
//   any non-final state --cancel--> cancelled
//   starting, running, preempting --time limit reached--> timed_out
#pragma once

#include <optional>
#include <string_view>

#include "common/status.h"

namespace hangar::job {

enum class JobState : uint8_t {
  kPending,
  kStarting,
  kRunning,
  kPreempting,
  kSucceeded,
  kFailed,
  kCancelled,
  kTimedOut,  // ran to its time_limit: checkpoint signal, grace, then killed
};

std::string_view JobStateName(JobState s);
std::optional<JobState> ParseJobState(std::string_view name);
bool IsFinal(JobState s);
// True when the job holds (or may hold) resources on nodes.
bool HoldsResources(JobState s);
bool CanTransition(JobState from, JobState to);
// OK when allowed; FailedPrecondition naming both states otherwise.
Status CheckTransition(JobState from, JobState to);

}  // namespace hangar::job
