// TaskRunner: runs a task as a real process on this node -- its own process group (and its own
// cgroup v2 with the task's CPU and memory limits where the host allows), stdout and stderr to
// files, the environment the controller computed -- and reports how it ended.
//
// Thread-safe: the agent's stream thread launches and signals while a reaper collects exits.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "agent/fence/fence_dir.h"
#include "agent/runner/task_credentials.h"
#include "common/mutex.h"
#include "common/status.h"
#include "common/time.h"

namespace hangar::agent {

class ExitWatcher;

struct TaskLaunch {
  std::string task_id;  // unique on this node, e.g. "42.0" (job 42, task 0); safe as a file name
  std::vector<std::string> argv;
  std::vector<std::pair<std::string, std::string>> env;  // added to a minimal base environment
  std::string workdir;                                   // created if missing
  std::string stdout_path;                               // created/truncated
  std::string stderr_path;
  int64_t milli_cpu = 0;   // 0: no CPU limit
  int64_t memory_mib = 0;  // 0: no memory limit
  // Who it runs as; nullopt: the agent's own user. Another user needs an agent running as root;
  // an agent that is not root runs tasks only as itself. The task gets the account's HOME (its
  // workdir when the node has no account for the uid), USER and LOGNAME, unless `env` says.
  std::optional<TaskCredentials> run_as;
  // The process is a proxy that forwards the signals it gets to the real task (`podman run
  // --sig-proxy`): stops send it no SIGCONT, which podman 4.3 cannot always forward and, once one
  // forward fails, stops forwarding altogether (so the SIGTERM after it would be lost).
  bool signal_proxy = false;
  // What the fence keeper runs once it has stopped the task and it has gone (a container's
  // removal); empty: nothing.
  std::vector<std::string> cleanup_argv;
  // A pseudo-terminal's follower (an interactive task): the task's standard streams and its
  // controlling terminal, instead of /dev/null and the output files. -1: none.
  int terminal_fd = -1;
  // The task's standard input instead of /dev/null (a pipe an interactive task's session feeds).
  // -1: none.
  int stdin_fd = -1;
};

struct TaskExit {
  std::string task_id;
  int exit_code = 0;     // valid when signal == 0
  int signal = 0;        // the signal that killed it, 0 if it exited
  bool stopped = false;  // it ended after Stop()
};

struct RunnerOptions {
  // Where per-task cgroups are created (cgroup v2). Empty: detect "/sys/fs/cgroup/hangar-<pid>"
  // when the agent may write there; otherwise tasks run without a cgroup (and CgroupStatus()
  // says why).
  std::string cgroup_parent;
  bool use_cgroups = true;
  // The agent's state directory: every task is recorded under its fence/ for the node's fence
  // keeper (agent/fence/fence_keeper.h) from before its process starts until it has ended, and
  // carries HANGAR_TASK_ID. Empty: tasks are not guarded.
  std::string fence_state_dir;
};

class TaskRunner {
 public:
  explicit TaskRunner(RunnerOptions options = {});
  ~TaskRunner();  // does not kill tasks: they outlive the agent by design

  // Starts the task. Fails (and starts nothing) when the task id is already running, argv is
  // empty, or the program cannot be executed (the error names the program and errno's text).
  StatusOr<pid_t> Launch(const TaskLaunch& launch) HANGAR_EXCLUDES(mu_);
  // Sends `sig` to the task's whole process group. NotFound for an unknown or ended task.
  Status Signal(const std::string& task_id, int sig) HANGAR_EXCLUDES(mu_);
  // SIGTERM to the process group now, SIGKILL once `grace` has passed (checked by Reap()).
  Status Stop(const std::string& task_id, Duration grace) HANGAR_EXCLUDES(mu_);
  // A stop with a checkpoint phase first (a preemption, a drain): `checkpoint_signal` (and
  // SIGCONT) to the process group now; SIGTERM (and SIGCONT) when CheckpointDone() is called
  // for the task or `grace` has passed, whichever is first (the deadline is checked by Reap());
  // SIGKILL `kill_grace` after that SIGTERM. A task whose leader exits during the phase has
  // ended (reported stopped), and the rest of its group is killed as after Stop(). Neither stop
  // ever delays another: a checkpoint stop of a task already being stopped only brings its
  // deadlines forward, and sends the checkpoint signal only once. InvalidArgument for a signal
  // out of range, NotFound for an unknown or ended task.
  Status StopWithCheckpoint(const std::string& task_id, int checkpoint_signal, Duration grace,
                            Duration kill_grace) HANGAR_EXCLUDES(mu_);
  // The task says its checkpoint is written. In the checkpoint phase of a stop: SIGTERM now
  // (the early release), and true. Otherwise (a checkpoint it took on its own): nothing, and
  // false. NotFound for an unknown or ended task.
  StatusOr<bool> CheckpointDone(const std::string& task_id) HANGAR_EXCLUDES(mu_);
  // Whether the task is in the checkpoint phase of a stop (signalled, not yet sent SIGTERM).
  bool InCheckpointPhase(const std::string& task_id) const HANGAR_EXCLUDES(mu_);
  // Non-blocking: the tasks that ended since the last call; also sends overdue SIGKILLs.
  // A task has ended when its process group leader has exited, even if other members of the
  // group live on (those of a stopped task are then killed at once). An adopted task's exit
  // status comes from the kernel's taskstats reports (exit_watcher.h); where none came (it ended
  // while no agent ran, or taskstats is not to be had) it is reported as exit_code -1, signal 0.
  std::vector<TaskExit> Reap() HANGAR_EXCLUDES(mu_);
  // Takes charge of a task started by an earlier agent process (pid of its process group leader),
  // so that it can be signalled and its end noticed (by polling, since it is not our child).
  Status Adopt(const std::string& task_id, pid_t pid, bool signal_proxy = false)
      HANGAR_EXCLUDES(mu_);

  // Drops the fence records of tasks this runner does not run (those that ended while no agent
  // was there to see it); call after adopting.
  void ForgetUnguarded() HANGAR_EXCLUDES(mu_);

  bool IsRunning(const std::string& task_id) const HANGAR_EXCLUDES(mu_);
  std::vector<std::pair<std::string, pid_t>> Running() const HANGAR_EXCLUDES(mu_);
  // One line for the log: "cgroup v2 under /sys/fs/cgroup/..." or "no cgroup: <why>".
  std::string CgroupStatus() const HANGAR_EXCLUDES(mu_);

 private:
  struct Task;
  // Forks and execs outside the lock; Launch() has reserved the id in launching_.
  StatusOr<std::unique_ptr<Task>> Start(const TaskLaunch& launch) HANGAR_EXCLUDES(mu_);
  // The exit of a task whose leader has ended, or nullopt while it runs.
  std::optional<TaskExit> CheckEnded(const std::string& task_id, const Task& task)
      HANGAR_REQUIRES(mu_);
  // The task, if it is still running.
  StatusOr<Task*> FindRunning(const std::string& task_id) HANGAR_REQUIRES(mu_);
  void NoteTaskWithoutCgroup(const std::string& task_id, const Status& why) HANGAR_EXCLUDES(mu_);
  // SIGTERM and SIGCONT to the group; ends a checkpoint phase; SIGKILL due `grace` from now
  // (or earlier, if it already was).
  Status Terminate(const std::string& task_id, Task& task, Duration grace) HANGAR_REQUIRES(mu_);
  void RemoveEndedCgroups() HANGAR_REQUIRES(mu_);

  mutable Mutex mu_;
  RunnerOptions options_;
  // Set by the constructor, read-only afterwards (so read without mu_).
  std::string cgroup_parent_;             // empty when cgroups are not in use
  std::optional<fence::FenceDir> fence_;  // where tasks are recorded for the fence keeper
  bool cgroup_parent_created_ = false;
  // No cgroup: why; else which limits the parent can enforce.
  std::string cgroup_why_ HANGAR_GUARDED_BY(mu_);
  // The latest task that had to run without its cgroup, and why.
  std::string task_cgroup_note_ HANGAR_GUARDED_BY(mu_);
  std::map<std::string, std::unique_ptr<Task>> tasks_ HANGAR_GUARDED_BY(mu_);
  // Ids between the duplicate check and the record in tasks_.
  std::set<std::string> launching_ HANGAR_GUARDED_BY(mu_);
  // Cgroups of ended tasks that still hold processes.
  std::vector<std::string> ended_cgroups_ HANGAR_GUARDED_BY(mu_);
  // Adopted tasks' exit statuses (exit_watcher.h), started with the first adoption; null before,
  // or where the kernel's taskstats cannot be had (then their exits stay unknown).
  std::unique_ptr<ExitWatcher> exits_ HANGAR_GUARDED_BY(mu_);
  bool exits_tried_ HANGAR_GUARDED_BY(mu_) = false;
};

}  // namespace hangar::agent
