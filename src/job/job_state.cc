#include "job/job_state.h"

#include <string>

namespace hangar::job {

std::string_view JobStateName(JobState s) {
  switch (s) {
    case JobState::kPending:
      return "pending";
    case JobState::kStarting:
      return "starting";
    case JobState::kRunning:
      return "running";
    case JobState::kPreempting:
      return "preempting";
    case JobState::kSucceeded:
      return "succeeded";
    case JobState::kFailed:
      return "failed";
    case JobState::kCancelled:
      return "cancelled";
    case JobState::kTimedOut:
      return "timed_out";
  }
  return "unknown";
}

std::optional<JobState> ParseJobState(std::string_view name) {
  for (int i = 0; i <= static_cast<int>(JobState::kTimedOut); ++i) {
    if (JobStateName(static_cast<JobState>(i)) == name) return static_cast<JobState>(i);
  }
  return std::nullopt;
}

bool IsFinal(JobState s) {
  return s == JobState::kSucceeded || s == JobState::kFailed || s == JobState::kCancelled ||
         s == JobState::kTimedOut;
}

bool HoldsResources(JobState s) {
  return s == JobState::kStarting || s == JobState::kRunning || s == JobState::kPreempting;
}

bool CanTransition(JobState from, JobState to) {
  using S = JobState;
  if (IsFinal(from)) return false;
  if (to == S::kCancelled) return true;
  if (to == S::kTimedOut) return HoldsResources(from);
  switch (from) {
    // Failed without starting: its image could not be pinned (a tag that does not exist).
    case S::kPending:
      return to == S::kStarting || to == S::kFailed;
    case S::kStarting:
      return to == S::kRunning || to == S::kPending || to == S::kFailed || to == S::kPreempting ||
             to == S::kSucceeded;
    case S::kRunning:
      return to == S::kSucceeded || to == S::kFailed || to == S::kPreempting || to == S::kPending;
    case S::kPreempting:
      return to == S::kPending || to == S::kSucceeded || to == S::kFailed;
    default:
      return false;
  }
}

Status CheckTransition(JobState from, JobState to) {
  if (CanTransition(from, to)) return Status::Ok();
  return Status::FailedPrecondition("a " + std::string(JobStateName(from)) + " job cannot become " +
                                    std::string(JobStateName(to)));
}

}  // namespace hangar::job
