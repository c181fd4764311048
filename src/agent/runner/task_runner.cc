#include "agent/runner/task_runner.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>

#include "agent/fence/exit_watcher.h"
#include "agent/runner/os_error.h"
#include "agent/runner/process_spawn.h"
#include "agent/runner/task_cgroups.h"

namespace hangar::agent {

struct TaskRunner::Task {
  pid_t pid = -1;            // leader of the task's process group (its pgid is the same number)
  uint64_t start_ticks = 0;  // start time from /proc/<pid>/stat, to notice a reused pid; 0: unknown
  bool adopted = false;      // started by an earlier agent, so not our child
  std::string cgroup_dir;    // empty: the task has no cgroup of its own
  bool stop_requested = false;
  int64_t kill_at_nanos = kNever;  // MonotonicNanos() when SIGKILL is due
  // The checkpoint phase of a stop: the checkpoint signal has gone out, SIGTERM has not.
  bool checkpointing = false;
  int64_t term_at_nanos = kNever;  // MonotonicNanos() when the SIGTERM that ends the phase is due
  Duration kill_grace = 0;         // from that SIGTERM to SIGKILL
  bool signal_proxy = false;       // TaskLaunch::signal_proxy: no SIGCONT with a stop's signals
};

namespace {

constexpr int64_t kNanosPerMilli = 1000000;
constexpr size_t kMaxTaskIdLength = 200;  // "task-<id>" must fit in a file name (NAME_MAX 255)

// MonotonicNanos() `after` milliseconds from now, saturating (a grace may be "forever").
int64_t NanosFromNow(Duration after) {
  const int64_t now = MonotonicNanos();
  after = std::max<Duration>(after, 0);
  if (after > (kNever - now) / kNanosPerMilli) return kNever;
  return now + after * kNanosPerMilli;
}

struct ProcStat {
  char state = '?';
  uint64_t start_ticks = 0;
};

// Fields 3 (state) and 22 (starttime) of /proc/<pid>/stat; nullopt when the process is gone.
std::optional<ProcStat> ReadProcStat(pid_t pid) {
  std::ifstream file("/proc/" + std::to_string(pid) + "/stat");
  std::string text;
  if (!std::getline(file, text)) return std::nullopt;
  size_t name_end = text.rfind(')');  // the command name may itself hold spaces and parentheses
  if (name_end == std::string::npos) return std::nullopt;
  std::istringstream fields(text.substr(name_end + 1));
  ProcStat stat;
  fields >> stat.state;
  std::string skipped;
  for (int field = 4; field < 22; ++field) fields >> skipped;
  fields >> stat.start_ticks;
  if (!fields) return std::nullopt;
  return stat;
}

uint64_t StartTicks(pid_t pid) {
  std::optional<ProcStat> stat = ReadProcStat(pid);
  return stat ? stat->start_ticks : 0;
}

// For a process that is not our child. A zombie counts as ended: its parent may never reap it
// (an adopted task's parent is whatever adopted the orphan). A different start time means the
// pid now belongs to another process.
bool OtherProcessAlive(pid_t pid, uint64_t start_ticks) {
  if (kill(pid, 0) != 0 && errno == ESRCH) return false;
  std::optional<ProcStat> stat = ReadProcStat(pid);
  if (!stat) return kill(pid, 0) == 0 || errno != ESRCH;  // no /proc: kill() is all we know
  if (stat->state == 'Z' || stat->state == 'X') return false;
  return start_ticks == 0 || stat->start_ticks == start_ticks;
}

// A minimal base taken from the agent's own environment (its user's HOME, USER and LOGNAME
// when it runs as another), then the launch's pairs on top.
std::vector<std::string> TaskEnvironment(
    const std::vector<std::pair<std::string, std::string>>& extra,
    const std::optional<TaskCredentials>& run_as, const std::string& workdir) {
  std::map<std::string, std::string> env;
  for (const char* name : {"PATH", "HOME", "LANG", "TMPDIR"}) {
    if (const char* value = std::getenv(name)) env[name] = value;
  }
  if (run_as) {
    env.erase("HOME");
    if (!run_as->home.empty())
      env["HOME"] = run_as->home;
    else if (!workdir.empty())
      env["HOME"] = workdir;
    if (!run_as->name.empty()) env["USER"] = env["LOGNAME"] = run_as->name;
  }
  env.try_emplace("PATH", kDefaultTaskPath);
  env.try_emplace("TMPDIR", "/tmp");
  for (const auto& [name, value] : extra) env[name] = value;
  std::vector<std::string> out;
  for (const auto& [name, value] : env) out.push_back(name + "=" + value);
  return out;
}

Status ValidateTaskId(const std::string& task_id) {
  if (task_id.empty() || task_id == "." || task_id == ".." ||
      task_id.find_first_of(std::string("/\0", 2)) != std::string::npos ||
      task_id.size() > kMaxTaskIdLength) {
    return Status::InvalidArgument("task id '" + task_id + "' cannot name a file; use up to " +
                                   std::to_string(kMaxTaskIdLength) + " characters without '/'");
  }
  return Status::Ok();
}

Status ValidateLaunch(const TaskLaunch& launch) {
  HANGAR_RETURN_IF_ERROR(ValidateTaskId(launch.task_id));
  const std::string task = "task '" + launch.task_id + "': ";
  if (launch.argv.empty() || launch.argv[0].empty()) {
    return Status::InvalidArgument(task + "argv is empty; give the program to run");
  }
  for (const auto& [name, value] : launch.env) {
    if (name.empty() || name.find_first_of(std::string("=\0", 2)) != std::string::npos) {
      return Status::InvalidArgument(task + "environment variable name '" + name +
                                     "' is empty or holds '='");
    }
  }
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  if (launch.milli_cpu < 0 || launch.milli_cpu > kMax / 100) {
    return Status::InvalidArgument(task + "milli_cpu must be 0 (no limit) or positive");
  }
  if (launch.memory_mib < 0 || launch.memory_mib > kMax / (int64_t{1024} * 1024)) {
    return Status::InvalidArgument(task + "memory_mib must be 0 (no limit) or positive");
  }
  return Status::Ok();
}

}  // namespace

TaskRunner::TaskRunner(RunnerOptions options) : options_(std::move(options)) {
  if (!options_.fence_state_dir.empty()) {
    fence_.emplace(options_.fence_state_dir);
    (void)fence_->Create();  // a failure shows at the first task's record
  }
  if (!options_.use_cgroups) {
    cgroup_why_ = "disabled by options";
    return;
  }
  AgentCgroup cgroup = SetUpAgentCgroup(options_.cgroup_parent);
  cgroup_parent_ = cgroup.parent;
  cgroup_parent_created_ = cgroup.created_parent;
  cgroup_why_ = cgroup.note;
}

TaskRunner::~TaskRunner() {
  MutexLock lock(mu_);
  RemoveEndedCgroups();
  // Fails, as it should, while tasks still run under the parent: they outlive the agent.
  if (cgroup_parent_created_) RemoveCgroup(cgroup_parent_);
}

StatusOr<pid_t> TaskRunner::Launch(const TaskLaunch& launch) {
  HANGAR_RETURN_IF_ERROR(ValidateLaunch(launch));
  {
    MutexLock lock(mu_);
    if (tasks_.count(launch.task_id) != 0 || launching_.count(launch.task_id) != 0) {
      return Status::AlreadyExists("task '" + launch.task_id + "' is already running here");
    }
    launching_.insert(launch.task_id);
  }
  // Not under mu_: Reap() and Signal() must not wait for a fork and an exec.
  StatusOr<std::unique_ptr<Task>> task = Start(launch);
  MutexLock lock(mu_);
  launching_.erase(launch.task_id);
  if (!task.ok()) return task.status();
  pid_t pid = (*task)->pid;
  tasks_[launch.task_id] = std::move(*task);
  return pid;
}

StatusOr<std::unique_ptr<TaskRunner::Task>> TaskRunner::Start(const TaskLaunch& launch) {
  StatusOr<std::optional<TaskCredentials>> switched =
      SwitchFrom(geteuid(), getegid(), launch.run_as);
  if (!switched.ok()) {
    return Status(switched.status().code(),
                  "task '" + launch.task_id + "': " + switched.status().message());
  }
  const std::optional<TaskCredentials>& run_as = *switched;
  std::vector<std::pair<std::string, std::string>> env = launch.env;
  // The fence keeper finds the task's processes by it, those that left its group included.
  if (fence_ && std::none_of(env.begin(), env.end(),
                             [](const auto& e) { return e.first == "HANGAR_TASK_ID"; })) {
    env.emplace_back("HANGAR_TASK_ID", launch.task_id);
  }
  SpawnRequest request{launch.argv,
                       TaskEnvironment(env, run_as, launch.workdir),
                       launch.workdir,
                       launch.stdout_path,
                       launch.stderr_path,
                       "",
                       run_as};
  if (launch.stdin_fd >= 0) request.stdin_fd = launch.stdin_fd;
  if (launch.terminal_fd >= 0) {
    request.stdin_fd = request.stdout_fd = request.stderr_fd = launch.terminal_fd;
    request.controlling_terminal = true;
  }
  if (!cgroup_parent_.empty()) {
    StatusOr<std::string> dir =
        CreateTaskCgroup(cgroup_parent_, launch.task_id, launch.milli_cpu, launch.memory_mib);
    if (dir.ok()) {
      request.cgroup_dir = *dir;
    } else {
      NoteTaskWithoutCgroup(launch.task_id, dir.status());
    }
  }
  // Recorded before it starts: an agent killed between the start and the record would leave
  // the keeper a task it does not know of (it finds one without a pid by its HANGAR_TASK_ID).
  if (fence_) {
    Status guarded =
        fence_->GuardTask({launch.task_id, 0, 0, request.cgroup_dir, "", launch.cleanup_argv});
    if (!guarded.ok()) {
      if (!request.cgroup_dir.empty()) RemoveCgroup(request.cgroup_dir);
      return Status(guarded.code(),
                    "task '" + launch.task_id + "' cannot be fenced: " + guarded.message());
    }
  }
  StatusOr<SpawnedProcess> spawned = SpawnProcess(request);
  if (!spawned.ok()) {
    if (!request.cgroup_dir.empty()) RemoveCgroup(request.cgroup_dir);
    if (fence_) fence_->ReleaseTask(launch.task_id);
    return spawned.status();
  }
  auto task = std::make_unique<Task>();
  task->pid = spawned->pid;
  task->start_ticks = StartTicks(spawned->pid);
  task->signal_proxy = launch.signal_proxy;
  task->cgroup_dir = request.cgroup_dir;
  if (!spawned->cgroup.ok()) {
    NoteTaskWithoutCgroup(launch.task_id, spawned->cgroup);
    RemoveCgroup(task->cgroup_dir);  // the process never joined it
    task->cgroup_dir.clear();
  }
  if (fence_) {
    (void)fence_->GuardTask(
        {launch.task_id, task->pid, task->start_ticks, task->cgroup_dir, "", launch.cleanup_argv});
  }
  return task;
}

void TaskRunner::NoteTaskWithoutCgroup(const std::string& task_id, const Status& why) {
  MutexLock lock(mu_);
  task_cgroup_note_ = "task " + task_id + " runs without a cgroup: " + why.message();
}

StatusOr<TaskRunner::Task*> TaskRunner::FindRunning(const std::string& task_id) {
  auto it = tasks_.find(task_id);
  if (it == tasks_.end()) return Status::NotFound("no task '" + task_id + "' runs on this node");
  Task* task = it->second.get();
  // An adopted task's pid may have been reused since the last Reap(): never signal a stranger.
  if (task->adopted && !OtherProcessAlive(task->pid, task->start_ticks)) {
    return Status::NotFound("task '" + task_id + "' has ended");
  }
  return task;
}

Status TaskRunner::Signal(const std::string& task_id, int sig) {
  MutexLock lock(mu_);
  HANGAR_ASSIGN_OR_RETURN(Task * task, FindRunning(task_id));
  if (kill(-task->pid, sig) == 0) return Status::Ok();
  if (errno == ESRCH) return Status::NotFound("task '" + task_id + "' has ended");
  return ErrnoStatus(errno, "cannot signal task '" + task_id + "'");
}

Status TaskRunner::Stop(const std::string& task_id, Duration grace) {
  MutexLock lock(mu_);
  HANGAR_ASSIGN_OR_RETURN(Task * task, FindRunning(task_id));
  return Terminate(task_id, *task, grace);
}

Status TaskRunner::Terminate(const std::string& task_id, Task& task, Duration grace) {
  if (kill(-task.pid, SIGTERM) != 0 && errno != ESRCH) {
    return ErrnoStatus(errno, "cannot stop task '" + task_id + "'");
  }
  if (!task.signal_proxy)
    kill(-task.pid, SIGCONT);  // a suspended group would not act on SIGTERM before the SIGKILL
  task.stop_requested = true;
  task.checkpointing = false;
  task.term_at_nanos = kNever;
  task.kill_at_nanos = std::min(task.kill_at_nanos, NanosFromNow(grace));  // never delays
  return Status::Ok();
}

Status TaskRunner::StopWithCheckpoint(const std::string& task_id, int checkpoint_signal,
                                      Duration grace, Duration kill_grace) {
  if (checkpoint_signal <= 0 || checkpoint_signal >= NSIG) {
    return Status::InvalidArgument("checkpoint signal " + std::to_string(checkpoint_signal) +
                                   " is not a signal (1 to " + std::to_string(NSIG - 1) + ")");
  }
  MutexLock lock(mu_);
  HANGAR_ASSIGN_OR_RETURN(Task * task, FindRunning(task_id));
  grace = std::max<Duration>(grace, 0);
  kill_grace = std::max<Duration>(kill_grace, 0);
  if (task->stop_requested) {  // already stopping: bring the deadlines forward, signal nothing
    if (task->checkpointing) {
      task->term_at_nanos = std::min(task->term_at_nanos, NanosFromNow(grace));
      task->kill_grace = std::min(task->kill_grace, kill_grace);
    } else {
      const Duration both = grace > kNever - kill_grace ? kNever : grace + kill_grace;
      task->kill_at_nanos = std::min(task->kill_at_nanos, NanosFromNow(both));
    }
    return Status::Ok();
  }
  if (kill(-task->pid, checkpoint_signal) != 0 && errno != ESRCH) {
    return ErrnoStatus(errno, "cannot signal task '" + task_id + "' to checkpoint");
  }
  if (!task->signal_proxy)
    kill(-task->pid, SIGCONT);  // a suspended task could not write its checkpoint
  task->stop_requested = true;
  task->checkpointing = true;
  task->term_at_nanos = NanosFromNow(grace);
  task->kill_grace = kill_grace;
  return Status::Ok();
}

StatusOr<bool> TaskRunner::CheckpointDone(const std::string& task_id) {
  MutexLock lock(mu_);
  HANGAR_ASSIGN_OR_RETURN(Task * task, FindRunning(task_id));
  if (!task->checkpointing) return false;
  HANGAR_RETURN_IF_ERROR(Terminate(task_id, *task, task->kill_grace));
  return true;
}

bool TaskRunner::InCheckpointPhase(const std::string& task_id) const {
  MutexLock lock(mu_);
  auto it = tasks_.find(task_id);
  return it != tasks_.end() && it->second->checkpointing;
}

std::vector<TaskExit> TaskRunner::Reap() {
  MutexLock lock(mu_);
  const int64_t now = MonotonicNanos();
  std::vector<TaskExit> exits;
  for (auto it = tasks_.begin(); it != tasks_.end();) {
    Task& task = *it->second;
    std::optional<TaskExit> exit = CheckEnded(it->first, task);
    if (!exit) {
      if (task.checkpointing && now >= task.term_at_nanos) {
        (void)Terminate(it->first, task, task.kill_grace);  // the grace ran out: no more waiting
      }
      if (now >= task.kill_at_nanos) {
        kill(-task.pid, SIGKILL);
        task.kill_at_nanos = kNever;
      }
      ++it;
      continue;
    }
    if (!task.cgroup_dir.empty()) ended_cgroups_.push_back(task.cgroup_dir);
    if (fence_) {
      fence_->ReleaseTask(it->first);
      fence_->ForgetKeptExit(it->first);  // seen by this agent: the keeper's copy is not needed
    }
    exits.push_back(std::move(*exit));
    it = tasks_.erase(it);
  }
  RemoveEndedCgroups();
  return exits;
}

// A task ends when its leader does, even if other members of its group live on: the leader is
// what the task's exit status belongs to, and launchers (shells, torchrun) wait for their own
// children. When the leader of a stopped task has gone, the rest of its group is killed at once.
std::optional<TaskExit> TaskRunner::CheckEnded(const std::string& task_id, const Task& task) {
  TaskExit exit;
  exit.task_id = task_id;
  exit.exit_code = -1;  // unknown, unless waitpid() says otherwise
  exit.stopped = task.stop_requested;
  int status = 0;
  pid_t reaped = waitpid(task.pid, &status, WNOHANG);
  if (reaped == 0) return std::nullopt;
  if (reaped == task.pid) {
    if (WIFEXITED(status)) exit.exit_code = WEXITSTATUS(status);
    if (WIFSIGNALED(status)) exit.signal = WTERMSIG(status);
    // Only now, with the leader just reaped, is the group id certain not to have been reused:
    // the number stays reserved while any member remains.
    if (task.stop_requested) kill(-task.pid, SIGKILL);
    return exit;
  }
  // ECHILD: not our child (adopted), or reaped behind our back (SIGCHLD ignored): poll.
  if (OtherProcessAlive(task.pid, task.start_ticks)) return std::nullopt;
  // The kernel reported an adopted leader's exit as it happened; the report may still be on its
  // way to the watcher's thread.
  std::optional<int> s;
  if (task.adopted && exits_) s = exits_->TakeStatus(task.pid, 300);
  // Or it ended before this agent watched it: the node's fence keeper saw it (fence_keeper.h).
  if (!s && task.adopted && fence_) s = fence_->KeptExit(task_id, task.pid);
  if (s) {
    if (WIFEXITED(*s)) exit.exit_code = WEXITSTATUS(*s);
    if (WIFSIGNALED(*s)) exit.signal = WTERMSIG(*s);
  }
  return exit;
}

void TaskRunner::RemoveEndedCgroups() {
  // A cgroup cannot be removed while stray members of the task's group still run in it.
  std::erase_if(ended_cgroups_, [](const std::string& dir) { return RemoveCgroup(dir); });
}

Status TaskRunner::Adopt(const std::string& task_id, pid_t pid, bool signal_proxy) {
  HANGAR_RETURN_IF_ERROR(ValidateTaskId(task_id));
  const std::string what = "cannot adopt task '" + task_id + "' (pid " + std::to_string(pid) + ")";
  if (pid <= 0) return Status::InvalidArgument(what + ": not a process id");
  MutexLock lock(mu_);
  if (tasks_.count(task_id) != 0 || launching_.count(task_id) != 0) {
    return Status::AlreadyExists("task '" + task_id + "' is already running here");
  }
  // A zombie has a process group still, but its task has ended: not adopted (its status is found
  // elsewhere: the fence keeper's, fence_keeper.h). Its parent died with the agent, and this
  // system's init had not reaped it yet.
  if (!OtherProcessAlive(pid, 0)) return Status::NotFound(what + ": it has ended");
  pid_t pgid = getpgid(pid);
  if (pgid < 0) return ErrnoStatus(errno, what);
  if (pgid != pid) {
    return Status::FailedPrecondition(what + ": it does not lead its process group (" +
                                      std::to_string(pgid) + "); adopt the group's leader");
  }
  if (pgid == getpgrp()) {
    return Status::FailedPrecondition(what + ": it leads the agent's own process group");
  }
  auto task = std::make_unique<Task>();
  task->pid = pid;
  task->start_ticks = StartTicks(pid);
  task->adopted = true;
  task->signal_proxy = signal_proxy;
  if (!exits_tried_) {
    exits_tried_ = true;
    auto watcher = ExitWatcher::Start();
    if (watcher.ok())
      exits_ = std::move(*watcher);
    else
      std::fprintf(stderr, "adopted tasks' exit statuses will be unknown: %s\n",
                   watcher.status().message().c_str());
  }
  if (exits_) exits_->Watch(pid);
  // A task that an earlier agent started under the same parent has its cgroup there.
  if (!cgroup_parent_.empty()) {
    std::string cgroup_dir = cgroup_parent_ + "/task-" + task_id;
    std::error_code error;
    if (std::filesystem::is_directory(cgroup_dir, error)) task->cgroup_dir = cgroup_dir;
  }
  if (fence_) {
    // The record an earlier agent wrote keeps its cleanup command.
    auto earlier = fence_->Guarded(task_id);
    (void)fence_->GuardTask({task_id, pid, task->start_ticks, task->cgroup_dir, "",
                             earlier ? earlier->cleanup : std::vector<std::string>{}});
  }
  tasks_[task_id] = std::move(task);
  return Status::Ok();
}

void TaskRunner::ForgetUnguarded() {
  if (!fence_) return;
  MutexLock lock(mu_);
  for (const fence::GuardedTask& t : fence_->GuardedTasks()) {
    if (!tasks_.count(t.task_id) && !launching_.count(t.task_id)) fence_->ReleaseTask(t.task_id);
  }
}

bool TaskRunner::IsRunning(const std::string& task_id) const {
  MutexLock lock(mu_);
  return tasks_.count(task_id) != 0;
}

std::vector<std::pair<std::string, pid_t>> TaskRunner::Running() const {
  MutexLock lock(mu_);
  std::vector<std::pair<std::string, pid_t>> out;
  for (const auto& [task_id, task] : tasks_) out.emplace_back(task_id, task->pid);
  return out;
}

std::string TaskRunner::CgroupStatus() const {
  MutexLock lock(mu_);
  if (cgroup_parent_.empty()) return "no cgroup: " + cgroup_why_;
  std::string line = "cgroup v2 under " + cgroup_parent_ + " (" + cgroup_why_ + ")";
  if (!task_cgroup_note_.empty()) line += "; " + task_cgroup_note_;
  return line;
}

}  // namespace hangar::agent
