#include "agent/fence/fence_keeper.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <spdlog/spdlog.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <thread>

#include "common/time.h"

extern char** environ;

namespace hangar::agent::fence {
namespace {

struct ProcStat {
  char state = '?';
  pid_t pgrp = 0;
  uint64_t start_ticks = 0;
};

// Fields 3 (state), 5 (pgrp) and 22 (starttime) of /proc/<pid>/stat.
std::optional<ProcStat> ReadStat(pid_t pid) {
  std::ifstream file("/proc/" + std::to_string(pid) + "/stat");
  std::string text;
  if (!std::getline(file, text)) return std::nullopt;
  const size_t name_end = text.rfind(')');
  if (name_end == std::string::npos) return std::nullopt;
  std::istringstream fields(text.substr(name_end + 1));
  ProcStat s;
  std::string skip;
  fields >> s.state >> skip >> s.pgrp;
  for (int field = 6; field < 22; ++field) fields >> skip;
  fields >> s.start_ticks;
  if (!fields) return std::nullopt;
  return s;
}

bool Live(const ProcStat& s) { return s.state != 'Z' && s.state != 'X'; }

// Whether the process's initial environment holds HANGAR_TASK_ID=<task_id> exactly and, when
// the task names its agent, HANGAR_AGENT_STATE_DIR=<that agent's state dir>: task ids repeat
// across clusters, and a keeper must never stop another agent's task of the same id.
bool CarriesTaskId(pid_t pid, const GuardedTask& t) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/environ", std::ios::binary);
  if (!in) return false;
  std::string env(1, '\0');
  env.append(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  env.push_back('\0');
  auto holds = [&env](const std::string& name, const std::string& value) {
    return env.find(std::string(1, '\0') + name + "=" + value + std::string(1, '\0')) !=
           std::string::npos;
  };
  return holds("HANGAR_TASK_ID", t.task_id) &&
         (t.agent_state_dir.empty() || holds("HANGAR_AGENT_STATE_DIR", t.agent_state_dir));
}

int64_t WallMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace

int SignalTask(const GuardedTask& t, int sig) {
  if (sig == SIGKILL && !t.cgroup_dir.empty()) {
    std::ofstream kill_file(t.cgroup_dir + "/cgroup.kill");
    kill_file << "1";  // kernels before 5.14 have no such file: the signals below still go out
  }
  bool leader = false;
  if (t.pid > 0) {
    auto s = ReadStat(t.pid);
    leader = s && Live(*s) && (t.start_ticks == 0 || s->start_ticks == t.start_ticks);
  }
  if (leader && sig != 0) {
    kill(-t.pid, sig);
    if (sig == SIGTERM) kill(-t.pid, SIGCONT);  // a suspended group would not act on it
  }
  int found = 0;
  const pid_t self = getpid();
  DIR* proc = opendir("/proc");
  if (proc == nullptr) return leader ? 1 : 0;
  while (dirent* e = readdir(proc)) {
    char* end = nullptr;
    const long n = std::strtol(e->d_name, &end, 10);
    if (n <= 0 || *end != '\0' || n == self) continue;
    const pid_t pid = static_cast<pid_t>(n);
    auto s = ReadStat(pid);
    if (!s || !Live(*s)) continue;
    // Its group's members (started after a leader that is gone: a group id is not reused while
    // a member remains), or anything that says it belongs to the task (setsid daemons included).
    const bool member =
        t.pid > 0 && s->pgrp == t.pid && (leader || s->start_ticks >= t.start_ticks);
    if (!member && !CarriesTaskId(pid, t)) continue;
    ++found;
    if (sig != 0) {
      kill(pid, sig);
      if (sig == SIGTERM) kill(pid, SIGCONT);
    }
  }
  closedir(proc);
  return found;
}

void FenceKeeper::KeepExits(const std::vector<GuardedTask>& tasks) {
  if (!exits_) return;
  std::map<pid_t, std::string> guarded;
  for (const GuardedTask& t : tasks) {
    if (t.pid > 0) guarded[t.pid] = t.task_id;
  }
  for (const auto& [pid, task_id] : guarded) {
    if (watched_.emplace(pid, task_id).second) exits_->Watch(pid);
  }
  for (auto it = watched_.begin(); it != watched_.end();) {
    const pid_t pid = it->first;
    if (std::optional<int> status = exits_->TakeStatus(pid, 0)) {
      // Kept only while the task is still guarded: a running agent saw the end and released it.
      if (guarded.count(pid)) (void)dir_.KeepExit(it->second, pid, *status);
      it = watched_.erase(it);
    } else if (!guarded.count(pid) && kill(pid, 0) != 0) {
      it = watched_.erase(it);  // released, and gone without a report
    } else {
      ++it;
    }
  }
}

size_t FenceKeeper::Step(int64_t now_ms, bool agent_alive) {
  Reap();
  if (auto read = dir_.ReadLease()) lease_ = *read;
  const std::vector<GuardedTask> tasks = dir_.GuardedTasks();
  KeepExits(tasks);
  std::map<std::string, Stopping> still;
  for (const GuardedTask& t : tasks) {
    auto it = stopping_.find(t.task_id);
    const bool due = lease_.armed() && now_ms >= lease_.deadline_ms - lease_.term_grace_ms;
    if (!due) {
      if (it != stopping_.end()) {
        spdlog::warn(
            "fence: the lease was renewed while task {} was being stopped; it is left alone now",
            t.task_id);
      }
      // With no agent to release them, the records of tasks that ended go here.
      if (!agent_alive && SignalTask(t, 0) == 0) dir_.ReleaseTask(t.task_id);
      continue;
    }
    Stopping s = it != stopping_.end() ? it->second : Stopping{lease_.deadline_ms};
    if (StopTask(t, now_ms, &s)) still[t.task_id] = s;
  }
  for (const auto& entry : stopping_) {
    const std::string& id =
        entry.first;  // not a structured binding: clang 14's lambdas refuse those
    if (!still.count(id) && std::none_of(tasks.begin(), tasks.end(),
                                         [&](const GuardedTask& t) { return t.task_id == id; })) {
      Forget(GuardedTask{id}, &entry.second);  // its agent saw it end and released it
    }
  }
  stopping_ = std::move(still);
  return tasks.size();
}

// SIGTERM once, SIGKILL at the deadline, then watches it go. Returns false once it has gone.
bool FenceKeeper::StopTask(const GuardedTask& t, int64_t now_ms, Stopping* s) {
  if (s->term_wall_ms == 0) {
    s->term_wall_ms = WallMs();
    // Recorded before the signal, so that the agent, seeing the task end, knows why.
    (void)dir_.MarkFenced(t.task_id,
                          "stopped by the node's fence: the node's lease ran out (no word from the "
                          "controller), so its jobs may run elsewhere now");
    const int n = SignalTask(t, SIGTERM);
    spdlog::warn("fence: the node's lease runs out in {} ms: SIGTERM to task {} ({} processes)",
                 std::max<int64_t>(0, s->deadline_ms - now_ms), t.task_id, n);
  }
  if (!s->killed && now_ms >= s->deadline_ms) {
    s->killed = true;
    s->kill_wall_ms = WallMs();
    const int n = SignalTask(t, SIGKILL);
    spdlog::warn("fence: the node's lease ran out: SIGKILL to task {} ({} processes)", t.task_id,
                 n);
  }
  if (SignalTask(t, 0) > 0) return true;
  StartCleanup({t.task_id, t.cleanup});
  Forget(t, s);
  return false;
}

void FenceKeeper::StartCleanup(Cleanup c) {
  if (c.argv.empty()) return;
  ++c.tries;
  std::vector<std::string> args = c.argv;
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid = -1;
  // Its output goes where the keeper's goes (fence/keeper.log).
  const int err = posix_spawnp(&pid, argv[0], nullptr, nullptr, argv.data(), environ);
  if (err != 0) {
    spdlog::error("fence: cannot run the cleanup of task {} ({}): {}", c.task_id, args[0],
                  std::strerror(err));
    return;
  }
  std::string command;
  for (const std::string& a : args) command += (command.empty() ? "" : " ") + a;
  spdlog::warn("fence: task {} has gone; cleaning up after it (try {}): {}", c.task_id, c.tries,
               command);
  cleaning_[pid] = std::move(c);
}

// A failed cleanup is tried again: podman 4.3's first `rm --force` of a container whose conmon
// died with it fails ("container state improper"), having only learned that it stopped.
void FenceKeeper::Reap() {
  std::vector<Cleanup> again;
  for (auto it = cleaning_.begin(); it != cleaning_.end();) {
    int status = 0;
    if (waitpid(it->first, &status, WNOHANG) != it->first) {
      ++it;
      continue;
    }
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0) {
      spdlog::info("fence: the cleanup of task {} is done", it->second.task_id);
    } else if (it->second.tries < 3) {
      again.push_back(std::move(it->second));
    } else {
      spdlog::error(
          "fence: the cleanup of task {} failed {} times (wait status {}); see the lines "
          "above",
          it->second.task_id, it->second.tries, status);
    }
    it = cleaning_.erase(it);
  }
  for (Cleanup& c : again) StartCleanup(std::move(c));
}

void FenceKeeper::Forget(const GuardedTask& t, const Stopping* s) {
  std::ostringstream line;
  line << "{\"task\":\"" << t.task_id << "\",\"pid\":" << t.pid
       << ",\"term_ms\":" << s->term_wall_ms << ",\"kill_ms\":" << s->kill_wall_ms
       << ",\"gone_ms\":" << WallMs() << "}";
  dir_.AppendLog(line.str());
  dir_.ReleaseTask(t.task_id);
  spdlog::warn("fence: task {} has stopped", t.task_id);
}

int RunFenceKeeper(const std::string& state_dir) {
  close_range(3, ~0U, 0);  // nothing of the agent's: its sockets would keep its ports open
  FenceDir dir(state_dir);
  if (Status s = dir.Create(); !s.ok()) {
    spdlog::error("fence keeper: {}", s.message());
    return 2;
  }
  std::optional<HeldLock> mine = HeldLock::TryTake(dir.Path("keeper.lock"));
  if (!mine) return 0;  // another keeper guards this node
  spdlog::info("fence keeper (pid {}) guards the tasks under {}", getpid(), dir.root());
  auto exits = ExitWatcher::Start();
  if (!exits.ok()) {
    spdlog::warn("fence keeper: tasks that end while no agent runs will have no exit status: {}",
                 exits.status().message());
  }
  FenceKeeper keeper(state_dir, exits.ok() ? std::move(*exits) : nullptr);
  bool agent_alive = true;
  for (int64_t round = 0;; ++round) {
    std::error_code ec;
    if (!std::filesystem::exists(dir.root(), ec)) return 0;
    const size_t left = keeper.Step(LeaseClockMs(), agent_alive);
    // With no task left, the agent's lock is looked at every round: a stopped node's keeper
    // leaves within a round of its agent, not a second later.
    if (left == 0 || round % 20 == 0) agent_alive = LockHeld(dir.Path("agent.lock"));
    if (left == 0 && !agent_alive && keeper.idle()) {
      // Held until exit: an agent starting now waits for it, then finds no keeper and starts one.
      std::optional<HeldLock> agent = HeldLock::TryTake(dir.Path("agent.lock"));
      if (agent) {
        spdlog::info("fence keeper: no agent and no task left; exiting");
        return 0;
      }
      agent_alive = true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

Status EnsureFenceKeeper(const std::string& state_dir, const std::string& hangar_binary,
                         std::vector<pid_t>* children) {
  std::erase_if(*children, [](pid_t pid) { return waitpid(pid, nullptr, WNOHANG) != 0; });
  FenceDir dir(state_dir);
  if (LockHeld(dir.Path("keeper.lock"))) return Status::Ok();
  if (hangar_binary.empty()) {
    return Status::FailedPrecondition("no hangar binary to start the fence keeper with");
  }
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t none, defaults;
  sigemptyset(&none);
  sigemptyset(&defaults);
  for (int sig : {SIGPIPE, SIGINT, SIGTERM, SIGHUP, SIGCHLD}) sigaddset(&defaults, sig);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setsigdefault(&attr, &defaults);
  posix_spawnattr_setflags(&attr,
                           POSIX_SPAWN_SETSID | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
  posix_spawn_file_actions_t files;
  posix_spawn_file_actions_init(&files);
  const std::string log = dir.Path("keeper.log");
  posix_spawn_file_actions_addopen(&files, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&files, 1, log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
  posix_spawn_file_actions_adddup2(&files, 1, 2);
  std::vector<std::string> args = {hangar_binary, "fence-keeper", "--state-dir", state_dir};
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid = -1;
  const int err = posix_spawn(&pid, hangar_binary.c_str(), &files, &attr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&files);
  posix_spawnattr_destroy(&attr);
  if (err != 0) {
    return Status::Unavailable("cannot start the fence keeper (" + hangar_binary +
                               " fence-keeper): " + std::strerror(err));
  }
  children->push_back(pid);
  return Status::Ok();
}

}  // namespace hangar::agent::fence
