// The checkpoint phase of a stop: the checkpoint signal first, release on checkpoint-done, SIGTERM
// at the deadline, SIGKILL after the kill grace.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "agent/runner/task_runner.h"
#include "agent/runner/task_runner_fixture.h"

namespace hangar::agent {
namespace {

using namespace runner_testing;
using ::testing::AnyOf;
using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;

std::string SignalLogger(bool term_exits = true) {
  return std::string("trap 'echo USR1 >> signals' USR1; trap 'echo TERM >> signals") +
         (term_exits ? "; exit 0" : "") +
         "' TERM; echo ready > ready; while :; do sleep 1 & wait $!; done";
}

TEST_F(TaskRunnerTest, CheckpointStopSignalsFirstAndTerminatesAtTheDeadline) {
  TaskRunner& runner = NewRunner();
  TaskLaunch launch = Shell("ckpt", SignalLogger());
  ASSERT_TRUE(runner.Launch(launch).ok());
  ASSERT_TRUE(WaitForLine(launch, "ready"));

  const auto asked = std::chrono::steady_clock::now();
  ASSERT_TRUE(runner.StopWithCheckpoint("ckpt", SIGUSR1, 300, 60 * kSecond).ok());
  EXPECT_TRUE(runner.InCheckpointPhase("ckpt"));
  ASSERT_TRUE(WaitForLine(launch, "signals"));
  EXPECT_EQ(ReadFile(fs::path(launch.workdir) / "signals"), "USR1\n");  // nothing else yet
  // Reap() sends the SIGTERM once the grace has passed, not before.
  std::this_thread::sleep_until(asked + std::chrono::milliseconds(400));
  TaskExit exit = WaitForExit(runner, "ckpt");
  EXPECT_TRUE(exit.stopped);
  EXPECT_EQ(exit.exit_code, 0);  // its TERM trap exited: no SIGKILL was needed
  EXPECT_EQ(exit.signal, 0);
  EXPECT_EQ(ReadFile(fs::path(launch.workdir) / "signals"), "USR1\nTERM\n");
}

// A task behind a signal proxy (podman run) gets the stop's signals and no SIGCONT with them;
// any other task gets SIGCONT too, so that a suspended one can act on them.
TEST_F(TaskRunnerTest, ASignalProxyGetsTheStopsSignalsWithoutSigcont) {
  const std::string logger = "trap 'echo CONT >> signals' CONT; " + SignalLogger();
  for (const bool proxy : {true, false}) {
    TaskRunner& runner = NewRunner();
    const std::string id = proxy ? "proxy" : "plain";
    TaskLaunch launch = Shell(id, logger);
    launch.signal_proxy = proxy;
    ASSERT_TRUE(runner.Launch(launch).ok());
    ASSERT_TRUE(WaitForLine(launch, "ready"));
    ASSERT_TRUE(runner.StopWithCheckpoint(id, SIGUSR1, kHour, 60 * kSecond).ok());
    ASSERT_TRUE(WaitForLine(launch, "signals"));
    if (!proxy) {
      // Its CONT trap has run before the TERM that ends it: a shell that finds USR1, TERM and
      // CONT pending at once runs their traps in signal order, and TERM's exits first.
      ASSERT_TRUE(Eventually([&] {
        return ReadFile(fs::path(launch.workdir) / "signals").find("CONT") != std::string::npos;
      })) << ReadFile(fs::path(launch.workdir) / "signals");
    }
    ASSERT_TRUE(runner.CheckpointDone(id).ok());
    EXPECT_TRUE(WaitForExit(runner, id).stopped);
    const std::string got = ReadFile(fs::path(launch.workdir) / "signals");
    if (proxy) {
      EXPECT_EQ(got, "USR1\nTERM\n");
    } else {
      EXPECT_THAT(got, HasSubstr("CONT")) << got;
      EXPECT_THAT(got, HasSubstr("TERM")) << got;
    }
  }
}

TEST_F(TaskRunnerTest, CheckpointDoneReleasesTheTaskBeforeItsGrace) {
  TaskRunner& runner = NewRunner();
  TaskLaunch launch = Shell("early", SignalLogger());
  ASSERT_TRUE(runner.Launch(launch).ok());
  ASSERT_TRUE(WaitForLine(launch, "ready"));

  // An hour's grace: only the early release can end it within the test's patience.
  ASSERT_TRUE(runner.StopWithCheckpoint("early", SIGUSR1, kHour, 60 * kSecond).ok());
  ASSERT_TRUE(WaitForLine(launch, "signals"));
  EXPECT_TRUE(runner.Reap().empty());
  EXPECT_TRUE(runner.InCheckpointPhase("early"));
  EXPECT_EQ(ReadFile(fs::path(launch.workdir) / "signals"), "USR1\n");

  StatusOr<bool> released = runner.CheckpointDone("early");
  ASSERT_TRUE(released.ok()) << released.status().ToString();
  EXPECT_TRUE(*released);
  EXPECT_FALSE(runner.InCheckpointPhase("early"));
  TaskExit exit = WaitForExit(runner, "early");
  EXPECT_TRUE(exit.stopped);
  EXPECT_EQ(exit.exit_code, 0);
  EXPECT_EQ(ReadFile(fs::path(launch.workdir) / "signals"), "USR1\nTERM\n");
}

TEST_F(TaskRunnerTest, CheckpointStopEscalatesToSigkillAfterTheKillGrace) {
  TaskRunner& runner = NewRunner();
  TaskLaunch launch = Shell("stubborn", SignalLogger(/*term_exits=*/false));
  ASSERT_TRUE(runner.Launch(launch).ok());
  ASSERT_TRUE(WaitForLine(launch, "ready"));

  ASSERT_TRUE(runner.StopWithCheckpoint("stubborn", SIGUSR1, 100, 100).ok());
  TaskExit exit = WaitForExit(runner, "stubborn");
  EXPECT_TRUE(exit.stopped);
  EXPECT_EQ(exit.signal, SIGKILL);
  // The shell may die before its TERM trap has run; the checkpoint signal came first either way.
  EXPECT_THAT(ReadFile(fs::path(launch.workdir) / "signals"), AnyOf("USR1\n", "USR1\nTERM\n"));
}

TEST_F(TaskRunnerTest, ATaskThatExitsAfterItsCheckpointEndsStoppedWithItsGroup) {
  TaskRunner& runner = NewRunner();
  // A child that ignores the checkpoint signal must not outlive its leader.
  TaskLaunch launch = Shell("quits",
                            "(trap '' USR1; exec sleep 1000) & echo $! > child.pid; "
                            "trap 'echo USR1 >> signals; exit 7' USR1; "
                            "while :; do sleep 1 & wait $!; done");
  ASSERT_TRUE(runner.Launch(launch).ok());
  ASSERT_TRUE(WaitForLine(launch, "child.pid"));
  pid_t child = std::stoi(ReadFile(fs::path(launch.workdir) / "child.pid"));
  strays_.push_back(child);

  ASSERT_TRUE(runner.StopWithCheckpoint("quits", SIGUSR1, kHour, kHour).ok());
  TaskExit exit = WaitForExit(runner, "quits");
  EXPECT_TRUE(exit.stopped);
  EXPECT_EQ(exit.exit_code, 7);
  EXPECT_EQ(ReadFile(fs::path(launch.workdir) / "signals"), "USR1\n");
  EXPECT_TRUE(Eventually([&] { return ProcessGone(child); }));
}

TEST_F(TaskRunnerTest, ASecondStopNeverSignalsAgainNorDelays) {
  TaskRunner& runner = NewRunner();
  TaskLaunch launch = Shell("twice", SignalLogger());
  ASSERT_TRUE(runner.Launch(launch).ok());
  ASSERT_TRUE(WaitForLine(launch, "ready"));

  ASSERT_TRUE(runner.StopWithCheckpoint("twice", SIGUSR1, kHour, kHour).ok());
  ASSERT_TRUE(WaitForLine(launch, "signals"));
  ASSERT_TRUE(runner.StopWithCheckpoint("twice", SIGUSR1, kHour, kHour).ok());  // no 2nd USR1
  EXPECT_TRUE(runner.InCheckpointPhase("twice"));
  ASSERT_TRUE(runner.Stop("twice", kHour).ok());  // a plain stop: SIGTERM now
  EXPECT_FALSE(runner.InCheckpointPhase("twice"));
  TaskExit exit = WaitForExit(runner, "twice");
  EXPECT_TRUE(exit.stopped);
  // A second USR1 would have been trapped before the TERM (the shell runs traps in signal order).
  EXPECT_EQ(ReadFile(fs::path(launch.workdir) / "signals"), "USR1\nTERM\n");
}

TEST_F(TaskRunnerTest, CheckpointDoneOutsideAStopChangesNothing) {
  TaskRunner& runner = NewRunner();
  TaskLaunch launch = Shell("own", SignalLogger());
  ASSERT_TRUE(runner.Launch(launch).ok());
  ASSERT_TRUE(WaitForLine(launch, "ready"));

  StatusOr<bool> released = runner.CheckpointDone("own");
  ASSERT_TRUE(released.ok());
  EXPECT_FALSE(*released);
  EXPECT_TRUE(runner.IsRunning("own"));
  EXPECT_FALSE(runner.InCheckpointPhase("own"));
  EXPECT_TRUE(runner.Reap().empty());
  EXPECT_FALSE(fs::exists(fs::path(launch.workdir) / "signals"));

  EXPECT_EQ(runner.StopWithCheckpoint("own", 0, kSecond, kSecond).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(runner.StopWithCheckpoint("own", NSIG, kSecond, kSecond).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(runner.StopWithCheckpoint("nope", SIGUSR1, kSecond, kSecond).code(),
            StatusCode::kNotFound);
  EXPECT_EQ(runner.CheckpointDone("nope").status().code(), StatusCode::kNotFound);
  EXPECT_TRUE(runner.IsRunning("own"));
}

}  // namespace
}  // namespace hangar::agent
