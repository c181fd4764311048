#include "job/job_state.h"

#include <gtest/gtest.h>

namespace hangar::job {
namespace {

TEST(JobStateTest, AllowedAndRefusedMoves) {
  EXPECT_TRUE(CanTransition(JobState::kPending, JobState::kStarting));
  EXPECT_TRUE(CanTransition(JobState::kRunning, JobState::kPreempting));
  EXPECT_TRUE(CanTransition(JobState::kPreempting, JobState::kPending));
  EXPECT_TRUE(CanTransition(JobState::kRunning, JobState::kPending));  // node lost: requeue
  EXPECT_TRUE(CanTransition(JobState::kPending, JobState::kCancelled));
  EXPECT_TRUE(CanTransition(JobState::kPending, JobState::kFailed))
      << "its image could not be pinned";
  EXPECT_FALSE(CanTransition(JobState::kPending, JobState::kRunning));
  EXPECT_FALSE(CanTransition(JobState::kSucceeded, JobState::kPending));
  EXPECT_FALSE(CanTransition(JobState::kCancelled, JobState::kCancelled));
  EXPECT_TRUE(CanTransition(JobState::kRunning, JobState::kTimedOut));
  EXPECT_TRUE(CanTransition(JobState::kStarting, JobState::kTimedOut));
  EXPECT_FALSE(CanTransition(JobState::kPending, JobState::kTimedOut))
      << "only a job that runs can run out of time";
  EXPECT_FALSE(CanTransition(JobState::kTimedOut, JobState::kPending));
  Status s = CheckTransition(JobState::kFailed, JobState::kRunning);
  EXPECT_EQ(s.message(), "a failed job cannot become running");
}

TEST(JobStateTest, NamesRoundTrip) {
  for (int i = 0; i <= static_cast<int>(JobState::kTimedOut); ++i) {
    auto s = static_cast<JobState>(i);
    EXPECT_EQ(*ParseJobState(JobStateName(s)), s);
  }
  EXPECT_TRUE(IsFinal(JobState::kCancelled));
  EXPECT_TRUE(IsFinal(JobState::kTimedOut));
  EXPECT_EQ(JobStateName(JobState::kTimedOut), "timed_out");
  EXPECT_TRUE(HoldsResources(JobState::kPreempting));
  EXPECT_FALSE(HoldsResources(JobState::kPending));
}

}  // namespace
}  // namespace hangar::job
