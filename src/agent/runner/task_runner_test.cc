#include "agent/runner/task_runner.h"

#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <linux/magic.h>
#include <signal.h>
#include <sys/statfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <thread>

#include "agent/runner/process_spawn.h"
#include "agent/runner/task_cgroups.h"

namespace hangar::agent {
namespace {

namespace fs = std::filesystem;
using ::testing::AnyOf;
using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;

// Guards against a hang only: no test asserts how long anything took.
constexpr auto kPatience = std::chrono::seconds(60);

bool Eventually(const std::function<bool()>& condition) {
  const auto deadline = std::chrono::steady_clock::now() + kPatience;
  while (!condition()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return true;
}

std::string ReadFile(const fs::path& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// Gone, or a zombie: the init of some machines (this test's among them) never reaps orphans.
bool ProcessGone(pid_t pid) {
  if (kill(pid, 0) != 0 && errno == ESRCH) return true;
  std::string stat = ReadFile("/proc/" + std::to_string(pid) + "/stat");
  size_t name_end = stat.rfind(')');
  return name_end != std::string::npos && name_end + 2 < stat.size() && stat[name_end + 2] == 'Z';
}

// The mount point of a writable cgroup v2 hierarchy ("/sys/fs/cgroup" on a pure v2 host,
// "/sys/fs/cgroup/unified" on a hybrid one), or "" when there is none.
std::string WritableCgroup2Mount() {
  std::ifstream mountinfo("/proc/self/mountinfo");
  for (std::string line; std::getline(mountinfo, line);) {
    if (line.find(" - cgroup2 ") == std::string::npos) continue;
    std::istringstream fields(line);
    std::string id, parent_id, device, root, mount_point;
    fields >> id >> parent_id >> device >> root >> mount_point;
    if (access(mount_point.c_str(), W_OK) == 0) return mount_point;
  }
  return "";
}

// Starts `sleep 1000` as the leader of a new session whose parent has already exited, as a task
// of an earlier agent would be. Returns its pid, or -1.
pid_t StartOrphanedSleep() {
  int fds[2];
  if (pipe(fds) != 0) return -1;
  pid_t middle = fork();
  if (middle == 0) {
    pid_t leader = fork();
    if (leader == 0) {
      setsid();
      close(fds[0]);
      close(fds[1]);
      execl("/bin/sleep", "sleep", "1000", static_cast<char*>(nullptr));
      _exit(127);
    }
    ssize_t written = write(fds[1], &leader, sizeof leader);
    _exit(written == sizeof leader ? 0 : 1);
  }
  close(fds[1]);
  pid_t leader = -1;
  if (read(fds[0], &leader, sizeof leader) != sizeof leader) leader = -1;
  close(fds[0]);
  waitpid(middle, nullptr, 0);
  return leader;
}

class TaskRunnerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char dir[] = "/tmp/hangar-runner-test-XXXXXX";
    ASSERT_NE(mkdtemp(dir), nullptr);
    dir_ = dir;
  }

  void TearDown() override {
    while (!runners_.empty()) DestroyRunner(*runners_.back());
    for (pid_t pid : strays_) {
      if (!ProcessGone(pid)) kill(pid, SIGKILL);
    }
    std::error_code ignored;
    fs::remove_all(dir_, ignored);
  }

  TaskRunner& NewRunner(RunnerOptions options = {}) {
    runners_.push_back(std::make_unique<TaskRunner>(std::move(options)));
    return *runners_.back();
  }

  // Kills whatever the runner still runs, collects the exits, then destroys it.
  void DestroyRunner(TaskRunner& runner) {
    for (const auto& [task_id, pid] : runner.Running()) kill(-pid, SIGKILL);
    EXPECT_TRUE(Eventually([&] {
      runner.Reap();
      return runner.Running().empty();
    }));
    std::erase_if(runners_, [&](const auto& owned) { return owned.get() == &runner; });
  }

  TaskLaunch Shell(const std::string& task_id, const std::string& script) {
    TaskLaunch launch;
    launch.task_id = task_id;
    launch.argv = {"/bin/sh", "-c", script};
    launch.workdir = (dir_ / ("work-" + task_id)).string();
    launch.stdout_path = (dir_ / "logs" / (task_id + ".out")).string();
    launch.stderr_path = (dir_ / "logs" / (task_id + ".err")).string();
    return launch;
  }

  // Polls Reap() until `task_id` has ended. Exits of other tasks are kept for their own turn.
  TaskExit WaitForExit(TaskRunner& runner, const std::string& task_id) {
    auto is_it = [&](const TaskExit& exit) { return exit.task_id == task_id; };
    EXPECT_TRUE(Eventually([&] {
      for (TaskExit& exit : runner.Reap()) reaped_.push_back(exit);
      return std::any_of(reaped_.begin(), reaped_.end(), is_it);
    })) << task_id
        << " never ended";
    auto it = std::find_if(reaped_.begin(), reaped_.end(), is_it);
    if (it == reaped_.end()) return TaskExit{"(none)", -999, -999, false};
    TaskExit exit = *it;
    reaped_.erase(it);
    return exit;
  }

  // Waits until the task has written a line to `name` in its workdir.
  bool WaitForLine(const TaskLaunch& launch, const std::string& name) {
    return Eventually([&] { return ReadFile(fs::path(launch.workdir) / name).ends_with("\n"); });
  }

  fs::path dir_;
  std::vector<std::unique_ptr<TaskRunner>> runners_;
  std::vector<pid_t> strays_;     // processes outside any runner, killed in TearDown
  std::vector<TaskExit> reaped_;  // exits that WaitForExit() collected for other tasks
};

TEST_F(TaskRunnerTest, RunsATaskAndReportsItsExitCodeOnce) {
  TaskRunner& runner = NewRunner();
  TaskLaunch launch = Shell("42.0", "echo out; echo err >&2; exit 3");
  launch.stdout_path = (dir_ / "logs/deeper/still/out.txt").string();
  StatusOr<pid_t> pid = runner.Launch(launch);
  ASSERT_TRUE(pid.ok()) << pid.status().ToString();
  EXPECT_GT(*pid, 0);

  TaskExit exit = WaitForExit(runner, "42.0");
  EXPECT_EQ(exit.exit_code, 3);
  EXPECT_EQ(exit.signal, 0);
  EXPECT_FALSE(exit.stopped);
  EXPECT_EQ(ReadFile(launch.stdout_path), "out\n");
  EXPECT_EQ(ReadFile(launch.stderr_path), "err\n");
  EXPECT_TRUE(fs::is_directory(launch.workdir));
  EXPECT_FALSE(runner.IsRunning("42.0"));
  EXPECT_TRUE(runner.Reap().empty());
}

TEST_F(TaskRunnerTest, GivesTheTaskAMinimalEnvironmentPlusItsOwnVariables) {
  ASSERT_EQ(setenv("HANGAR_RUNNER_TEST_SECRET", "leaked", 1), 0);
  TaskRunner& runner = NewRunner();
  TaskLaunch launch =
      Shell("env",
            "echo \"FOO=$FOO\"; echo \"SECRET=${HANGAR_RUNNER_TEST_SECRET-unset}\"; "
            "echo \"HOME=$HOME\"; echo \"TMPDIR=${TMPDIR-unset}\"; pwd");
  launch.env = {{"FOO", "bar"}, {"HOME", "/home/task"}};
  ASSERT_TRUE(runner.Launch(launch).ok());
  EXPECT_EQ(WaitForExit(runner, "env").exit_code, 0);
  unsetenv("HANGAR_RUNNER_TEST_SECRET");

  const char* tmpdir = std::getenv("TMPDIR");
  EXPECT_EQ(ReadFile(launch.stdout_path), "FOO=bar\nSECRET=unset\nHOME=/home/task\nTMPDIR=" +
                                              std::string(tmpdir != nullptr ? tmpdir : "/tmp") +
                                              "\n" + fs::canonical(launch.workdir).string() + "\n");
}

TEST_F(TaskRunnerTest, StartsTheTaskCleanly) {
  // What an agent may have set up for itself must not reach the task: a descriptor opened
  // without O_CLOEXEC (numbered apart from what a shell opens), a blocked and an ignored signal.
  int null_fd = open("/dev/null", O_RDONLY);
  ASSERT_GE(null_fd, 0);
  int leaked_fd = fcntl(null_fd, F_DUPFD, 100);
  close(null_fd);
  ASSERT_GE(leaked_fd, 100);
  sigset_t term, previous_mask;
  sigemptyset(&term);
  sigaddset(&term, SIGTERM);
  ASSERT_EQ(pthread_sigmask(SIG_BLOCK, &term, &previous_mask), 0);
  struct sigaction ignore = {}, previous_action;
  ignore.sa_handler = SIG_IGN;
  sigaction(SIGUSR2, &ignore, &previous_action);

  TaskRunner& runner = NewRunner();
  TaskLaunch shell = Shell("clean",
                           "readlink /proc/$$/fd/0; for fd in /proc/$$/fd/*; do "
                           "echo fd${fd##*/}; done; ps -o sid= -p $$");
  StatusOr<pid_t> pid = runner.Launch(shell);
  // Run directly, not under a shell: a shell changes its own signal mask while it waits.
  TaskLaunch direct = Shell("signals", "");
  direct.argv = {"grep", "-E", "^(SigBlk|SigIgn)", "/proc/self/status"};
  Status direct_started = runner.Launch(direct).status();
  sigaction(SIGUSR2, &previous_action, nullptr);
  pthread_sigmask(SIG_SETMASK, &previous_mask, nullptr);
  close(leaked_fd);
  ASSERT_TRUE(pid.ok()) << pid.status().ToString();
  ASSERT_TRUE(direct_started.ok()) << direct_started.ToString();

  EXPECT_EQ(WaitForExit(runner, "clean").exit_code, 0);
  EXPECT_EQ(WaitForExit(runner, "signals").exit_code, 0);
  std::string out = ReadFile(shell.stdout_path);
  EXPECT_THAT(out, StartsWith("/dev/null\n"));
  EXPECT_THAT(out, Not(HasSubstr("fd" + std::to_string(leaked_fd) + "\n")));
  EXPECT_THAT(out, HasSubstr(std::to_string(*pid) + "\n"));  // the leader of its own session
  EXPECT_EQ(ReadFile(direct.stdout_path), "SigBlk:\t0000000000000000\nSigIgn:\t0000000000000000\n");
}

TEST_F(TaskRunnerTest, SharesOneFileWhenStdoutAndStderrAreTheSame) {
  TaskRunner& runner = NewRunner();
  TaskLaunch launch = Shell("both", "echo a; echo b >&2; echo c");
  launch.stderr_path = launch.stdout_path;
  ASSERT_TRUE(runner.Launch(launch).ok());
  EXPECT_EQ(WaitForExit(runner, "both").exit_code, 0);
  EXPECT_EQ(ReadFile(launch.stdout_path), "a\nb\nc\n");
}

TEST_F(TaskRunnerTest, StopEndsTheWholeProcessGroup) {
  TaskRunner& runner = NewRunner();
  TaskLaunch launch = Shell("group", "sleep 1000 & echo $! > child.pid; wait");
  ASSERT_TRUE(runner.Launch(launch).ok());
  ASSERT_TRUE(WaitForLine(launch, "child.pid"));
  pid_t child = std::stoi(ReadFile(fs::path(launch.workdir) / "child.pid"));
  strays_.push_back(child);
  ASSERT_FALSE(ProcessGone(child));

  ASSERT_TRUE(runner.Stop("group", 60 * kSecond).ok());
  TaskExit exit = WaitForExit(runner, "group");
  EXPECT_TRUE(exit.stopped);
  EXPECT_EQ(exit.signal, SIGTERM);
  EXPECT_TRUE(Eventually([&] { return ProcessGone(child); }));
}

TEST_F(TaskRunnerTest, StopEscalatesToSigkillOnceTheGraceHasPassed) {
  TaskRunner& runner = NewRunner();
  TaskLaunch launch =
      Shell("stubborn", "trap '' TERM; echo ready > ready; while :; do sleep 1; done");
  ASSERT_TRUE(runner.Launch(launch).ok());
  ASSERT_TRUE(WaitForLine(launch, "ready"));

  ASSERT_TRUE(runner.Stop("stubborn", 100).ok());
  TaskExit exit = WaitForExit(runner, "stubborn");
  EXPECT_TRUE(exit.stopped);
  EXPECT_EQ(exit.signal, SIGKILL);
}

// A task that logs each USR1 and TERM it gets, in order, to `signals` in its workdir; TERM
// ends it unless `term_exits` is false. `wait` returns at once when a trapped signal arrives.
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
  EXPECT_THAT(ReadFile(fs::path(launch.workdir) / "signals"),
              AnyOf("USR1\n", "USR1\nTERM\n"));
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

TEST_F(TaskRunnerTest, SignalReachesTheTask) {
  TaskRunner& runner = NewRunner();
  TaskLaunch launch = Shell(
      "sig", "trap 'echo usr1 > got; exit 0' USR1; echo ready > ready; while :; do sleep 1; done");
  ASSERT_TRUE(runner.Launch(launch).ok());
  ASSERT_TRUE(WaitForLine(launch, "ready"));

  ASSERT_TRUE(runner.Signal("sig", SIGUSR1).ok());
  TaskExit exit = WaitForExit(runner, "sig");
  EXPECT_EQ(exit.exit_code, 0);
  EXPECT_EQ(exit.signal, 0);
  EXPECT_FALSE(exit.stopped);
  EXPECT_EQ(ReadFile(fs::path(launch.workdir) / "got"), "usr1\n");
}

TEST_F(TaskRunnerTest, ReportsAProgramThatCannotRunAndRecordsNothing) {
  TaskRunner& runner = NewRunner();
  TaskLaunch launch = Shell("bad", "");
  launch.argv = {"python5-hangar-missing", "train.py"};
  StatusOr<pid_t> missing = runner.Launch(launch);
  ASSERT_FALSE(missing.ok());
  EXPECT_THAT(missing.status().message(),
              StartsWith("cannot run 'python5-hangar-missing': No such file or directory"));

  // Found by path, so the child's execve() is what fails; its errno comes back through the pipe.
  launch.argv = {"/nonexistent/hangar/prog"};
  StatusOr<pid_t> no_file = runner.Launch(launch);
  ASSERT_FALSE(no_file.ok());
  EXPECT_EQ(no_file.status().message(),
            "cannot run '/nonexistent/hangar/prog': No such file or directory");

  fs::path script = dir_ / "not-executable.sh";
  std::ofstream(script) << "#!/bin/sh\nexit 0\n";
  fs::permissions(script, fs::perms::owner_read | fs::perms::owner_write);
  launch.argv = {script.string()};
  StatusOr<pid_t> no_exec = runner.Launch(launch);
  ASSERT_FALSE(no_exec.ok());
  EXPECT_EQ(no_exec.status().message(), "cannot run '" + script.string() + "': Permission denied");

  EXPECT_FALSE(runner.IsRunning("bad"));
  EXPECT_TRUE(runner.Running().empty());
  EXPECT_TRUE(runner.Reap().empty());
  ASSERT_TRUE(runner.Launch(Shell("bad", "exit 0")).ok());  // the id is free
  EXPECT_EQ(WaitForExit(runner, "bad").exit_code, 0);
}

TEST_F(TaskRunnerTest, ReportsAWorkdirThatCannotBeCreated) {
  TaskRunner& runner = NewRunner();
  std::ofstream(dir_ / "a-file") << "x";
  TaskLaunch launch = Shell("nowhere", "exit 0");
  launch.workdir = (dir_ / "a-file" / "work").string();
  StatusOr<pid_t> pid = runner.Launch(launch);
  ASSERT_FALSE(pid.ok());
  EXPECT_THAT(pid.status().message(), StartsWith("cannot create workdir '" + launch.workdir + "'"));
  EXPECT_TRUE(runner.Running().empty());
}

TEST_F(TaskRunnerTest, RejectsMalformedLaunches) {
  TaskRunner& runner = NewRunner();
  TaskLaunch no_argv = Shell("a", "");
  no_argv.argv.clear();
  TaskLaunch bad_id = Shell("../a", "exit 0");
  TaskLaunch bad_env = Shell("b", "exit 0");
  bad_env.env = {{"A=B", "c"}};
  TaskLaunch bad_cpu = Shell("c", "exit 0");
  bad_cpu.milli_cpu = -1;
  for (const TaskLaunch& launch : {no_argv, bad_id, bad_env, bad_cpu}) {
    EXPECT_EQ(runner.Launch(launch).status().code(), StatusCode::kInvalidArgument)
        << launch.task_id;
  }
  EXPECT_TRUE(runner.Running().empty());
}

TEST_F(TaskRunnerTest, RefusesATaskIdThatIsAlreadyRunning) {
  TaskRunner& runner = NewRunner();
  StatusOr<pid_t> pid = runner.Launch(Shell("dup", "exec sleep 1000"));
  ASSERT_TRUE(pid.ok());
  EXPECT_EQ(runner.Launch(Shell("dup", "exit 0")).status().code(), StatusCode::kAlreadyExists);
  EXPECT_EQ(runner.Adopt("dup", *pid).code(), StatusCode::kAlreadyExists);
  EXPECT_EQ(runner.Running(), (std::vector<std::pair<std::string, pid_t>>{{"dup", *pid}}));
}

TEST_F(TaskRunnerTest, UnknownTasksAreNotFound) {
  TaskRunner& runner = NewRunner();
  EXPECT_EQ(runner.Signal("nope", SIGTERM).code(), StatusCode::kNotFound);
  EXPECT_EQ(runner.Stop("nope", kSecond).code(), StatusCode::kNotFound);
  EXPECT_FALSE(runner.IsRunning("nope"));
}

TEST_F(TaskRunnerTest, AdoptsATaskStartedByAnEarlierAgent) {
  pid_t pid = StartOrphanedSleep();
  ASSERT_GT(pid, 0);
  strays_.push_back(pid);
  ASSERT_TRUE(Eventually([&] { return getpgid(pid) == pid; }));  // once it has called setsid()

  TaskRunner& runner = NewRunner();
  ASSERT_TRUE(runner.Adopt("7.1", pid).ok());
  EXPECT_TRUE(runner.IsRunning("7.1"));
  EXPECT_TRUE(runner.Reap().empty());
  ASSERT_TRUE(runner.Signal("7.1", 0).ok());

  ASSERT_TRUE(runner.Stop("7.1", 60 * kSecond).ok());
  TaskExit exit = WaitForExit(runner, "7.1");
  EXPECT_TRUE(exit.stopped);
  EXPECT_EQ(exit.exit_code, -1);  // not our child: how it ended is unknown
  EXPECT_EQ(exit.signal, 0);
  EXPECT_TRUE(ProcessGone(pid));
  EXPECT_EQ(runner.Signal("7.1", SIGTERM).code(), StatusCode::kNotFound);
}

TEST_F(TaskRunnerTest, AdoptRefusesWhatIsNotATaskLeader) {
  TaskRunner& runner = NewRunner();
  EXPECT_EQ(runner.Adopt("zero", 0).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(runner.Adopt("self", getpid()).code(), StatusCode::kFailedPrecondition);
  pid_t gone = fork();
  if (gone == 0) _exit(0);
  ASSERT_GT(gone, 0);
  waitpid(gone, nullptr, 0);
  EXPECT_EQ(runner.Adopt("gone", gone).code(), StatusCode::kNotFound);
  EXPECT_TRUE(runner.Running().empty());
}

TEST_F(TaskRunnerTest, LaunchesFromSeveralThreadsWhileAnotherReaps) {
  TaskRunner& runner = NewRunner();
  constexpr int kThreads = 4;
  constexpr int kTasksPerThread = 5;
  std::atomic<int> failures = 0;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kTasksPerThread; ++i) {
        std::string id = std::to_string(t) + "." + std::to_string(i);
        if (!runner.Launch(Shell(id, "exit " + std::to_string(i))).ok()) ++failures;
      }
    });
  }
  std::map<std::string, int> exit_codes;
  bool all_ended = Eventually([&] {
    for (const TaskExit& exit : runner.Reap()) exit_codes[exit.task_id] = exit.exit_code;
    return exit_codes.size() == kThreads * kTasksPerThread || failures > 0;
  });
  for (std::thread& thread : threads) thread.join();
  EXPECT_TRUE(all_ended);
  EXPECT_EQ(failures, 0);
  EXPECT_EQ(exit_codes["3.4"], 4);
}

TEST_F(TaskRunnerTest, OnlyOneOfTwoRacingLaunchesOfAnIdWins) {
  TaskRunner& runner = NewRunner();
  std::atomic<int> started = 0;
  std::atomic<int> refused = 0;
  auto launch = [&] {
    StatusOr<pid_t> pid = runner.Launch(Shell("race", "exec sleep 1000"));
    ++(pid.ok() ? started : refused);
  };
  std::thread first(launch), second(launch);
  first.join();
  second.join();
  EXPECT_EQ(started, 1);
  EXPECT_EQ(refused, 1);
}

TEST_F(TaskRunnerTest, ExplainsWhyThereIsNoCgroup) {
  EXPECT_EQ(NewRunner({.use_cgroups = false}).CgroupStatus(), "no cgroup: disabled by options");

  fs::create_directories(dir_ / "plain");
  TaskRunner& runner = NewRunner({.cgroup_parent = (dir_ / "plain" / "hangar").string()});
  EXPECT_EQ(runner.CgroupStatus(),
            "no cgroup: " + (dir_ / "plain").string() + " is not on a cgroup v2 file system");
  TaskLaunch launch = Shell("uncontained", "echo fine");
  launch.memory_mib = 64;
  ASSERT_TRUE(runner.Launch(launch).ok());
  EXPECT_EQ(WaitForExit(runner, "uncontained").exit_code, 0);
  EXPECT_EQ(ReadFile(launch.stdout_path), "fine\n");

  // Whatever this host allows, the line says which it is.
  std::string status = NewRunner().CgroupStatus();
  EXPECT_THAT(status, AnyOf(StartsWith("no cgroup: "), StartsWith("cgroup v2 under ")));
  struct statfs root {};
  if (statfs("/sys/fs/cgroup", &root) == 0 && root.f_type != CGROUP2_SUPER_MAGIC) {
    EXPECT_THAT(status, StartsWith("no cgroup: /sys/fs/cgroup is not on a cgroup v2 file system"));
  }
}

TEST_F(TaskRunnerTest, RunsEachTaskInItsOwnCgroupAndRemovesIt) {
  std::string mount = WritableCgroup2Mount();
  if (mount.empty()) GTEST_SKIP() << "no writable cgroup v2 hierarchy on this host";
  std::string parent = mount + "/hangar-test-" + std::to_string(getpid());
  TaskRunner& runner = NewRunner({.cgroup_parent = parent});
  ASSERT_THAT(runner.CgroupStatus(), StartsWith("cgroup v2 under " + parent + " ("));

  StatusOr<pid_t> pid = runner.Launch(Shell("cg.0", "exec sleep 1000"));
  ASSERT_TRUE(pid.ok()) << pid.status().ToString();
  std::string task_dir = parent + "/task-cg.0";
  EXPECT_TRUE(fs::is_directory(task_dir));
  EXPECT_THAT(ReadFile("/proc/" + std::to_string(*pid) + "/cgroup"),
              HasSubstr("/hangar-test-" + std::to_string(getpid()) + "/task-cg.0\n"));

  ASSERT_TRUE(runner.Stop("cg.0", 60 * kSecond).ok());
  EXPECT_TRUE(WaitForExit(runner, "cg.0").stopped);
  EXPECT_TRUE(Eventually([&] {
    runner.Reap();
    return !fs::exists(task_dir);
  }));
  DestroyRunner(runner);
  EXPECT_FALSE(fs::exists(parent));
}

TEST_F(TaskRunnerTest, WritesTheTaskLimitsIntoItsCgroup) {
  std::string mount = WritableCgroup2Mount();
  if (mount.empty()) GTEST_SKIP() << "no writable cgroup v2 hierarchy on this host";
  std::string parent = mount + "/hangar-test-" + std::to_string(getpid());
  TaskRunner& runner = NewRunner({.cgroup_parent = parent});
  if (runner.CgroupStatus() != "cgroup v2 under " + parent + " (cpu and memory limits)") {
    GTEST_SKIP() << runner.CgroupStatus();
  }
  TaskLaunch launch = Shell("limited", "exec sleep 1000");
  launch.milli_cpu = 1500;
  launch.memory_mib = 64;
  ASSERT_TRUE(runner.Launch(launch).ok());
  std::string task_dir = parent + "/task-limited";
  EXPECT_EQ(ReadFile(task_dir + "/cpu.max"), "150000 100000\n");
  EXPECT_EQ(ReadFile(task_dir + "/memory.max"), "67108864\n");

  ASSERT_TRUE(runner.Stop("limited", 60 * kSecond).ok());
  WaitForExit(runner, "limited");
  EXPECT_TRUE(Eventually([&] {
    runner.Reap();
    return !fs::exists(task_dir);
  }));
}

TEST_F(TaskRunnerTest, RunsATaskWithoutACgroupWhenItsLimitsCannotBeSet) {
  std::string mount = WritableCgroup2Mount();
  if (mount.empty()) GTEST_SKIP() << "no writable cgroup v2 hierarchy on this host";
  std::string parent = mount + "/hangar-test-" + std::to_string(getpid());
  TaskRunner& runner = NewRunner({.cgroup_parent = parent});
  if (runner.CgroupStatus() == "cgroup v2 under " + parent + " (cpu and memory limits)") {
    GTEST_SKIP() << "both limits can be set here";
  }
  ASSERT_THAT(runner.CgroupStatus(), StartsWith("cgroup v2 under " + parent));
  TaskLaunch launch = Shell("unlimited", "echo ran");
  launch.milli_cpu = 500;
  launch.memory_mib = 64;
  ASSERT_TRUE(runner.Launch(launch).ok());
  EXPECT_FALSE(fs::exists(parent + "/task-unlimited"));
  EXPECT_THAT(runner.CgroupStatus(),
              HasSubstr("; task unlimited runs without a cgroup: cannot set"));
  EXPECT_EQ(WaitForExit(runner, "unlimited").exit_code, 0);
  EXPECT_EQ(ReadFile(launch.stdout_path), "ran\n");
}

TEST(CpuMaxLineTest, IsAQuotaPerHundredMillisecondPeriod) {
  EXPECT_EQ(CpuMaxLine(1000), "100000 100000");
  EXPECT_EQ(CpuMaxLine(1500), "150000 100000");
  EXPECT_EQ(CpuMaxLine(8000), "800000 100000");
  EXPECT_EQ(CpuMaxLine(1), "1000 100000");  // the kernel's smallest quota
}

TEST(ResolveProgramTest, SearchesTheAbsoluteDirectoriesOfPath) {
  EXPECT_EQ(ResolveProgram("sh", "/nonexistent:relative:/bin").value(), "/bin/sh");
  EXPECT_EQ(ResolveProgram("./run.sh", "/bin").value(), "./run.sh");
  StatusOr<std::string> missing = ResolveProgram("python5-hangar-missing", "/bin:/usr/bin");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_EQ(missing.status().message(),
            "cannot run 'python5-hangar-missing': No such file or directory "
            "(not found in PATH /bin:/usr/bin)");
}

}  // namespace
}  // namespace hangar::agent
