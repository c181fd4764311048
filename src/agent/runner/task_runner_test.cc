#include "agent/runner/task_runner.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>

#include "agent/runner/task_runner_fixture.h"

namespace hangar::agent {
namespace {

using namespace runner_testing;
using ::testing::AnyOf;
using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;

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
  // Issue 16: a task's output is its owner's alone (it often echoes tokens and keys).
  EXPECT_EQ(fs::status(launch.stdout_path).permissions() & fs::perms::all,
            fs::perms::owner_read | fs::perms::owner_write);
  EXPECT_EQ(fs::status(launch.stderr_path).permissions() & fs::perms::all,
            fs::perms::owner_read | fs::perms::owner_write);
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
  // Not our child, yet how it ended is known: the kernel's taskstats report (exit_watcher.h).
  EXPECT_EQ(exit.exit_code, -1);
  EXPECT_EQ(exit.signal, SIGTERM);
  EXPECT_TRUE(ProcessGone(pid));
  EXPECT_EQ(runner.Signal("7.1", SIGTERM).code(), StatusCode::kNotFound);
}

// An adopted task that ends by itself ends with its own status, not "unknown" (which the
// controller counts as a failure: after an agent restart, a job that succeeded failed).
TEST_F(TaskRunnerTest, AnAdoptedTaskThatEndsByItselfReportsItsOwnStatus) {
  pid_t pid = StartOrphanedShell("sleep 1; exit 3");
  ASSERT_GT(pid, 0);
  strays_.push_back(pid);
  ASSERT_TRUE(Eventually([&] { return getpgid(pid) == pid; }));
  TaskRunner& runner = NewRunner();
  ASSERT_TRUE(runner.Adopt("8.1", pid).ok());
  TaskExit exit = WaitForExit(runner, "8.1");
  EXPECT_FALSE(exit.stopped);
  EXPECT_EQ(exit.exit_code, 3);
  EXPECT_EQ(exit.signal, 0);

  pid_t ok = StartOrphanedShell("sleep 1");
  ASSERT_GT(ok, 0);
  strays_.push_back(ok);
  ASSERT_TRUE(Eventually([&] { return getpgid(ok) == ok; }));
  ASSERT_TRUE(runner.Adopt("9.1", ok).ok());
  EXPECT_EQ(WaitForExit(runner, "9.1").exit_code, 0) << "a success stays a success";
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
  // A zombie (ended, not yet reaped: its parent, the agent before, died with it unreaped) has a
  // process group still, and is refused all the same.
  pid_t zombie = fork();
  if (zombie == 0) {
    setpgid(0, 0);
    _exit(0);
  }
  ASSERT_GT(zombie, 0);
  for (int i = 0; i < 200 && kill(zombie, 0) == 0; ++i) {
    std::ifstream stat("/proc/" + std::to_string(zombie) + "/stat");
    std::string pid, comm, state;
    if (stat >> pid >> comm >> state && state == "Z") break;
    usleep(5000);
  }
  EXPECT_EQ(runner.Adopt("zombie", zombie).code(), StatusCode::kNotFound);
  waitpid(zombie, nullptr, 0);
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

// One test for both outcomes, since a host either lets the parent enforce both limits (so each
// task's cgroup gets them) or it does not (so a task with limits runs without a cgroup, and the
// status line says so); which one this host is, the runner's status line tells.
TEST_F(TaskRunnerTest, WritesTheTaskLimitsIntoItsCgroupOrRunsWithoutOneWhenTheyCannotBeSet) {
  std::string mount = WritableCgroup2Mount();
  if (mount.empty()) GTEST_SKIP() << "no writable cgroup v2 hierarchy on this host";
  std::string parent = mount + "/hangar-test-" + std::to_string(getpid());
  TaskRunner& runner = NewRunner({.cgroup_parent = parent});
  ASSERT_THAT(runner.CgroupStatus(), StartsWith("cgroup v2 under " + parent));
  const bool both =
      runner.CgroupStatus() == "cgroup v2 under " + parent + " (cpu and memory limits)";
  TaskLaunch launch = Shell("limited", both ? "exec sleep 1000" : "echo ran");
  launch.milli_cpu = 1500;
  launch.memory_mib = 64;
  ASSERT_TRUE(runner.Launch(launch).ok());
  std::string task_dir = parent + "/task-limited";
  if (both) {
    EXPECT_EQ(ReadFile(task_dir + "/cpu.max"), "150000 100000\n");
    EXPECT_EQ(ReadFile(task_dir + "/memory.max"), "67108864\n");
    ASSERT_TRUE(runner.Stop("limited", 60 * kSecond).ok());
    WaitForExit(runner, "limited");
    EXPECT_TRUE(Eventually([&] {
      runner.Reap();
      return !fs::exists(task_dir);
    }));
    return;
  }
  EXPECT_FALSE(fs::exists(task_dir));
  EXPECT_THAT(runner.CgroupStatus(), HasSubstr("; task limited runs without a cgroup: cannot set"));
  EXPECT_EQ(WaitForExit(runner, "limited").exit_code, 0);
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
