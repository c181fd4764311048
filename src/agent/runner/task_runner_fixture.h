// What the TaskRunner tests share: helpers and the fixture that owns runners, their temporary
// directory and any stray processes (task_runner_test.cc, task_runner_checkpoint_test.cc).
#pragma once

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
#include "agent/runner/task_runner.h"

namespace hangar::agent::runner_testing {

namespace fs = std::filesystem;

// Guards against a hang only: no test asserts how long anything took.
inline constexpr auto kPatience = std::chrono::seconds(60);

inline bool Eventually(const std::function<bool()>& condition) {
  const auto deadline = std::chrono::steady_clock::now() + kPatience;
  while (!condition()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return true;
}

inline std::string ReadFile(const fs::path& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// Gone, or a zombie: the init of some machines (this test's among them) never reaps orphans.
inline bool ProcessGone(pid_t pid) {
  if (kill(pid, 0) != 0 && errno == ESRCH) return true;
  std::string stat = ReadFile("/proc/" + std::to_string(pid) + "/stat");
  size_t name_end = stat.rfind(')');
  return name_end != std::string::npos && name_end + 2 < stat.size() && stat[name_end + 2] == 'Z';
}

// The mount point of a writable cgroup v2 hierarchy ("/sys/fs/cgroup" on a pure v2 host,
// "/sys/fs/cgroup/unified" on a hybrid one), or "" when there is none.
inline std::string WritableCgroup2Mount() {
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

// Starts `script` under /bin/sh as the leader of a new session whose parent has already exited,
// as a task of an earlier agent would be (not this process's child). Returns its pid, or -1.
inline pid_t StartOrphanedShell(const char* script) {
  int fds[2];
  if (pipe(fds) != 0) return -1;
  pid_t middle = fork();
  if (middle == 0) {
    pid_t leader = fork();
    if (leader == 0) {
      setsid();
      close(fds[0]);
      close(fds[1]);
      execl("/bin/sh", "sh", "-c", script, static_cast<char*>(nullptr));
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

// The same for `sleep 1000`: a task that runs until it is stopped.
inline pid_t StartOrphanedSleep() { return StartOrphanedShell("exec /bin/sleep 1000"); }

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

}  // namespace hangar::agent::runner_testing
