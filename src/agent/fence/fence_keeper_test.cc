#include "agent/fence/fence_keeper.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>

namespace hangar::agent::fence {
namespace {

namespace fs = std::filesystem;

class FenceKeeperTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("fence-test-" + std::to_string(getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
    ASSERT_TRUE(FenceDir(dir_).Create().ok());
  }
  void TearDown() override {
    for (pid_t p : children_) {
      kill(-p, SIGKILL);
      kill(p, SIGKILL);
      waitpid(p, nullptr, 0);
    }
    fs::remove_all(dir_);
  }
  // `sleep 60` leading a process group of its own, with HANGAR_TASK_ID=task_id in its environment.
  // Its HANGAR_AGENT_STATE_DIR is `agent` (default: this test's agent, dir_).
  pid_t StartTask(const std::string& task_id, bool own_group = true, std::string agent = "") {
    if (agent.empty()) agent = dir_;
    pid_t pid = fork();
    if (pid == 0) {
      if (own_group) setsid();
      std::string env = "HANGAR_TASK_ID=" + task_id, state = "HANGAR_AGENT_STATE_DIR=" + agent;
      char* const argv[] = {const_cast<char*>("sleep"), const_cast<char*>("60"), nullptr};
      char* const envp[] = {env.data(), state.data(), nullptr};
      execve("/bin/sleep", argv, envp);
      _exit(127);
    }
    children_.push_back(pid);
    // Until it has exec'd, its environment is not the task's.
    for (int i = 0; i < 200 && SignalTask({task_id}, 0) == 0; ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    return pid;
  }
  // Whether it has ended (reaping it, as its parent).
  bool Ended(pid_t pid) {
    for (int i = 0; i < 200; ++i) {
      if (waitpid(pid, nullptr, WNOHANG) == pid) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return false;
  }

  std::string dir_;
  std::vector<pid_t> children_;
};

TEST_F(FenceKeeperTest, StopsGuardedTasksOnceTheLeaseHasRunOut) {
  FenceDir dir(dir_);
  const pid_t pid = StartTask("7.0.0");
  ASSERT_TRUE(dir.GuardTask({"7.0.0", pid, 0, ""}).ok());
  const int64_t now = LeaseClockMs();
  ASSERT_TRUE(dir.WriteLease({now + 60'000, 1000}).ok());
  FenceKeeper keeper(dir_);
  EXPECT_EQ(keeper.Step(now, true), 1u);
  EXPECT_FALSE(Ended(pid)) << "a live lease stops nothing";
  ASSERT_TRUE(dir.WriteLease({now - 1, 1000}).ok());
  keeper.Step(now, true);
  EXPECT_TRUE(Ended(pid));
  EXPECT_TRUE(dir.FencedBecause("7.0.0").has_value());
  keeper.Step(now, true);
  EXPECT_TRUE(dir.GuardedTasks().empty()) << "forgotten once gone";
}

TEST_F(FenceKeeperTest, NoLeaseMeansNoFence) {
  FenceDir dir(dir_);
  const pid_t pid = StartTask("8.0.0");
  ASSERT_TRUE(dir.GuardTask({"8.0.0", pid, 0, ""}).ok());
  ASSERT_TRUE(dir.WriteLease(Lease{}).ok());
  FenceKeeper keeper(dir_);
  keeper.Step(LeaseClockMs(), true);
  EXPECT_FALSE(Ended(pid));
  EXPECT_FALSE(dir.FencedBecause("8.0.0").has_value());
}

// The agent died between starting the task and recording its pid: the keeper finds it by its
// HANGAR_TASK_ID, even outside any process group it knows.
TEST_F(FenceKeeperTest, FindsATaskWithoutAPidByItsTaskId) {
  FenceDir dir(dir_);
  const pid_t pid = StartTask("9.1.0", /*own_group=*/false);
  ASSERT_TRUE(dir.GuardTask({"9.1.0", 0, 0, ""}).ok());
  ASSERT_TRUE(dir.WriteLease({LeaseClockMs() - 10, 0}).ok());
  FenceKeeper keeper(dir_);
  keeper.Step(LeaseClockMs(), false);
  EXPECT_TRUE(Ended(pid));
}

// Task ids repeat across clusters: a second agent on the host (another cluster's, or another
// test's: the flake that found it) runs its own 1.0.0. Fencing this agent's 1.0.0 must leave
// that one running, and a process that carries this task id with no agent is no task of ours.
TEST_F(FenceKeeperTest, LeavesAnotherAgentsTaskOfTheSameIdAlone) {
  FenceDir dir(dir_);
  const pid_t mine = StartTask("1.0.0", /*own_group=*/false);
  const pid_t theirs = StartTask("1.0.0", /*own_group=*/true, dir_ + "-other-agent");
  ASSERT_TRUE(dir.GuardTask({"1.0.0", 0, 0, ""}).ok());
  ASSERT_TRUE(dir.WriteLease({LeaseClockMs() - 10, 0}).ok());
  FenceKeeper keeper(dir_);
  keeper.Step(LeaseClockMs(), false);
  EXPECT_TRUE(Ended(mine));
  EXPECT_FALSE(Ended(theirs)) << "another agent's task of the same id was stopped";
}

TEST_F(FenceKeeperTest, SigtermComesTermGraceBeforeTheDeadlineAndARenewalStopsTheEscalation) {
  FenceDir dir(dir_);
  // A task that ignores SIGTERM: only the SIGKILL at the deadline ends it.
  pid_t pid = fork();
  if (pid == 0) {
    setsid();
    signal(SIGTERM, SIG_IGN);
    std::string env = "HANGAR_TASK_ID=10.0.0", state = "HANGAR_AGENT_STATE_DIR=" + dir_;
    char* const argv[] = {const_cast<char*>("sleep"), const_cast<char*>("60"), nullptr};
    char* const envp[] = {env.data(), state.data(), nullptr};
    execve("/bin/sleep", argv, envp);
    _exit(127);
  }
  children_.push_back(pid);
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  ASSERT_TRUE(dir.GuardTask({"10.0.0", pid, 0, ""}).ok());
  const int64_t now = LeaseClockMs();
  ASSERT_TRUE(dir.WriteLease({now + 500, 1000}).ok());
  FenceKeeper keeper(dir_);
  keeper.Step(now, true);  // within the grace: SIGTERM, which it ignores
  EXPECT_FALSE(Ended(pid));
  EXPECT_TRUE(dir.FencedBecause("10.0.0").has_value());
  ASSERT_TRUE(dir.WriteLease({now + 60'000, 1000}).ok());  // renewed
  keeper.Step(now + 600, true);
  EXPECT_FALSE(Ended(pid)) << "no SIGKILL after a renewal";
  ASSERT_TRUE(dir.WriteLease({now + 500, 1000}).ok());
  keeper.Step(now + 600, true);
  EXPECT_TRUE(Ended(pid));
}

// A container task's processes (`podman run`, conmon, the container's own) are killed by the fence;
// the container itself stays in podman's storage until something removes it. The keeper runs the
// task's cleanup command once the task has gone, and only then.
TEST_F(FenceKeeperTest, RunsAFencedTasksCleanupOnceItHasGone) {
  FenceDir dir(dir_);
  const pid_t pid = StartTask("12.0.0");
  const std::string done = dir_ + "/cleaned";
  const std::vector<std::string> cleanup = {"sh", "-c", "echo removed > '" + done + "'"};
  ASSERT_TRUE(dir.GuardTask({"12.0.0", pid, 0, "", "", cleanup}).ok());
  ASSERT_EQ(dir.Guarded("12.0.0").value_or(GuardedTask{}).cleanup, cleanup) << "kept on disk";
  FenceKeeper keeper(dir_);
  ASSERT_TRUE(dir.WriteLease({LeaseClockMs() + 60'000, 0}).ok());
  keeper.Step(LeaseClockMs(), true);
  EXPECT_FALSE(fs::exists(done)) << "nothing to clean while the lease holds";
  ASSERT_TRUE(dir.WriteLease({LeaseClockMs() - 10, 0}).ok());
  keeper.Step(LeaseClockMs(), true);
  ASSERT_TRUE(Ended(pid));
  // The step that sent SIGKILL may still have seen the task alive: the cleanup starts at a later
  // step, once the task has gone (idle() alone is true before it starts).
  for (int i = 0; i < 200 && !(keeper.idle() && fs::exists(done)); ++i) {
    keeper.Step(LeaseClockMs(), true);
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_TRUE(keeper.idle()) << "the cleanup command was reaped";
  std::ifstream in(done);
  std::string word;
  EXPECT_TRUE(in >> word && word == "removed") << "the cleanup ran";
}

TEST_F(FenceKeeperTest, WithoutAnAgentTheRecordsOfEndedTasksGo) {
  FenceDir dir(dir_);
  const pid_t pid = StartTask("11.0.0");
  ASSERT_TRUE(dir.GuardTask({"11.0.0", pid, 0, ""}).ok());
  kill(pid, SIGKILL);
  ASSERT_TRUE(Ended(pid));
  FenceKeeper keeper(dir_);
  EXPECT_EQ(keeper.Step(LeaseClockMs(), true), 1u) << "the agent's to release while it lives";
  keeper.Step(LeaseClockMs(), false);
  EXPECT_TRUE(dir.GuardedTasks().empty());
}

}  // namespace
}  // namespace hangar::agent::fence
