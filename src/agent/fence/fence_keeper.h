// The fence keeper: a small process of its own per node (the hangar binary, `hangar fence-keeper`),
// started by the agent in a session of its own, so that nothing that ends the agent -- kill -9
// included -- ends it. It holds the node's lease deadline (fence_dir.h): once the lease runs out
// without a renewal, it stops every task the agent guards: SIGTERM to the task's process group (and
// to any process that carries its HANGAR_TASK_ID) term_grace before the deadline, SIGKILL (and the
// cgroup's cgroup.kill) at it, and it records each in fenced/ and fenced.log. Once a fenced task
// has gone it runs the task's cleanup command (a container task's `podman rm`). The controller
// starts the next attempt of a lost node's jobs only after that deadline, so no attempt overlaps
// the one before it. A renewed lease stops the escalation.
//
// It also keeps how each guarded task ended (the kernel's exit reports, exit_watcher.h), so that an
// agent that was not running when a task ended (a restart, an upgrade) learns its exit status.
//
// It exits when it guards no task and no agent holds agent.lock, or when the fence folder is gone.
#pragma once

#include <sys/types.h>

#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "agent/fence/exit_watcher.h"
#include "agent/fence/fence_dir.h"
#include "common/status.h"

namespace hangar::agent::fence {

class FenceKeeper {
 public:
  // `exits`: the kernel's exit reports (null where they cannot be had: no exit statuses kept).
  explicit FenceKeeper(const std::string& state_dir, std::unique_ptr<ExitWatcher> exits = nullptr)
      : dir_(state_dir), exits_(std::move(exits)) {}

  // One look at the lease and the tasks at lease-clock time `now_ms`: signals what is due and
  // forgets tasks that were stopped and have gone (and, with no agent alive, the records of tasks
  // that ended by themselves). Returns how many tasks it guards.
  size_t Step(int64_t now_ms, bool agent_alive);

  const FenceDir& dir() const { return dir_; }
  // No cleanup command is still running.
  bool idle() const { return cleaning_.empty(); }

 private:
  struct Stopping {
    int64_t deadline_ms = 0;  // the deadline it was stopped for
    bool killed = false;
    int64_t term_wall_ms = 0, kill_wall_ms = 0;
  };
  bool StopTask(const GuardedTask& t, int64_t now_ms, Stopping* s);
  void Forget(const GuardedTask& t, const Stopping* s);
  struct Cleanup {
    std::string task_id;
    std::vector<std::string> argv;
    int tries = 0;
  };
  // Starts the task's cleanup command, if it has one, without waiting for it; Reap collects the
  // commands that have ended, logs how each went, and starts a failed one again (three tries).
  void StartCleanup(Cleanup c);
  void Reap();
  // Watches the guarded tasks' processes and keeps the exit statuses that came (KeepExit).
  void KeepExits(const std::vector<GuardedTask>& tasks);

  FenceDir dir_;
  Lease lease_;  // the last one read (a file that cannot be read keeps it)
  std::map<std::string, Stopping> stopping_;
  std::map<pid_t, Cleanup> cleaning_;  // cleanup commands running, by pid
  std::unique_ptr<ExitWatcher> exits_;
  std::map<pid_t, std::string> watched_;  // pid -> task id, watched by exits_
};

// Signals every live process of the task: its group (when its leader is still the process that
// was started), its cgroup (SIGKILL only), and processes whose environment holds its
// HANGAR_TASK_ID. Returns how many processes of it were found alive.
int SignalTask(const GuardedTask& t, int sig);

// The keeper's main loop (`hangar fence-keeper --state-dir DIR`): returns its exit status.
int RunFenceKeeper(const std::string& state_dir);

// Starts a keeper for `state_dir` unless one runs: `hangar_binary fence-keeper --state-dir DIR`, in
// a session of its own, its output appended to fence/keeper.log. Also reaps earlier keepers of this
// process that exited (`children`: the keepers this process started). Fails with a sentence when it
// cannot be started.
Status EnsureFenceKeeper(const std::string& state_dir, const std::string& hangar_binary,
                         std::vector<pid_t>* children);

}  // namespace hangar::agent::fence
