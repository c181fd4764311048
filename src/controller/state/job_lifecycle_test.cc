#include "controller/state/job_lifecycle.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

#include "controller/state/cluster_state.h"

namespace hangar::controller {
namespace {

using job::JobState;

TEST(JobLifecycleTest, MovesAJobTheWayTheStateMachineAllows) {
  JobRecord j;
  j.id = 7;
  JobLifecycle::Admit(j);
  EXPECT_EQ(j.state, JobState::kPending);
  EXPECT_TRUE(JobLifecycle::Transition(j, JobState::kStarting, "placement"));
  EXPECT_TRUE(JobLifecycle::Transition(j, JobState::kRunning, "every task running"));
  EXPECT_TRUE(JobLifecycle::Transition(j, JobState::kPending, "requeue"));
  EXPECT_TRUE(JobLifecycle::Transition(j, JobState::kCancelled, "cancel"));
  EXPECT_EQ(j.state, JobState::kCancelled);
}

// A requeued job is preempting while its previous attempt's tasks stop, then pending; the store
// does not keep those tasks, so a preempting job read back from it waits as pending.
TEST(JobLifecycleTest, PreemptingLeadsBackToPendingAndIsRestoredAsPending) {
  JobRecord j;
  j.id = 8;
  JobLifecycle::Admit(j);
  ASSERT_TRUE(JobLifecycle::Transition(j, JobState::kStarting, "placement"));
  EXPECT_TRUE(JobLifecycle::Transition(j, JobState::kPreempting, "requeue"));
  EXPECT_TRUE(JobLifecycle::Transition(j, JobState::kPending, "previous attempt stopped"));
  JobRecord r;
  JobLifecycle::Restore(r, JobState::kPreempting);
  EXPECT_EQ(r.state, JobState::kPending);
  JobLifecycle::Restore(r, JobState::kRunning);
  EXPECT_EQ(r.state, JobState::kRunning);
  EXPECT_EQ(
      StoppingReason(1),
      "waiting for 1 task of its previous attempt to checkpoint and stop before it starts again");
}

// A refused move is a bug in a flow: it stops builds with assertions (the sanitizer builds, where
// the state tests run too) and, in a release build, leaves the job where it was and is counted.
TEST(JobLifecycleTest, ARefusedMoveLeavesTheJobWhereItWas) {
  JobRecord j;
  j.id = 8;
  JobLifecycle::Restore(j, JobState::kSucceeded);
  const int64_t before = JobLifecycle::Refused();
  EXPECT_DEBUG_DEATH(
      {
        EXPECT_FALSE(JobLifecycle::Transition(j, JobState::kRunning, "test"));
        EXPECT_EQ(j.state, JobState::kSucceeded) << "an ended job stays ended";
        EXPECT_EQ(JobLifecycle::Refused(), before + 1);
      },
      "state machine refuses");
}

// The door is the only one: no other file of the state owner assigns a job record's state (the
// stores write rows, not records).
TEST(JobLifecycleTest, NoOtherFileOfTheControllerWritesAJobsState) {
  const std::filesystem::path src =
      std::filesystem::path(HANGAR_SOURCE_DIR) / "src" / "controller" / "state";
  const std::regex write(R"(\.state\s*=\s*(job::)?JobState::|\bj\.state\s*=[^=])");
  std::vector<std::string> writers;
  for (const auto& e : std::filesystem::recursive_directory_iterator(src)) {
    const std::string name = e.path().filename().string();
    if (!e.is_regular_file() || name.find("_test.") != std::string::npos ||
        name == "job_lifecycle.cc")
      continue;
    if (e.path().extension() != ".cc" && e.path().extension() != ".h") continue;
    std::ifstream in(e.path());
    std::stringstream text;
    text << in.rdbuf();
    if (std::regex_search(text.str(), write)) writers.push_back(e.path().string());
  }
  EXPECT_TRUE(writers.empty())
      << "these assign a job's state directly; call JobLifecycle::Transition: "
      << ::testing::PrintToString(writers);
}

}  // namespace
}  // namespace hangar::controller
