// The node's fence, on disk: what the agent tells the fence keeper (fence_keeper.h) and what the
// keeper tells the agent back, under <state dir>/fence. Files, not a pipe, so that either side may
// die and restart (kill -9 included) and find the other's word where it left it:
//
//   lease          the lease's end on the lease clock, or "none" (the controller fences nothing)
//   tasks/<id>     a running task: its process group leader, cgroup and cleanup command (written
//                  before its process starts, with pid 0, and again once it runs; removed when it
//                  has ended)
//   fenced/<id>    the keeper stopped this task because the lease ran out (and when)
//   fenced.log     one JSON line per task the keeper stopped, with its times
//   keeper.lock    held by the running keeper; agent.lock held by the running agent
//
// Every write replaces its file whole (a rename), so a reader never sees half of one.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"

namespace hangar::agent::fence {

// The lease clock: CLOCK_BOOTTIME in milliseconds. Monotonic, and it counts time the machine spent
// suspended, as the controller's clock does.
int64_t LeaseClockMs();

struct Lease {
  // No deadline: the keeper stops nothing (no controller granted a lease, or it fences no node).
  static constexpr int64_t kNone = INT64_MAX;
  int64_t deadline_ms = kNone;  // on the lease clock: tasks may run until then, not after
  int64_t term_grace_ms = 0;    // SIGTERM goes out this long before the deadline, SIGKILL at it
  bool armed() const { return deadline_ms != kNone; }
};

struct GuardedTask {
  std::string task_id;
  pid_t pid = 0;             // leader of its process group; 0: its process is being started
  uint64_t start_ticks = 0;  // the leader's start time (/proc/<pid>/stat), to tell a reused pid
  std::string cgroup_dir;    // empty: none
  // The agent's --state-dir, which its tasks carry as HANGAR_AGENT_STATE_DIR: a process is taken
  // for the task by its environment only when it names both the task and this agent (another
  // agent on the host, a second cluster's or a test's, runs tasks with the same ids).
  std::string agent_state_dir;
  // Run by the keeper once a task it fenced has gone (a container's removal: killing `podman run`
  // and its conmon leaves the container behind); empty: nothing to run.
  std::vector<std::string> cleanup;
};

class FenceDir {
 public:
  explicit FenceDir(const std::string& state_dir);

  const std::string& root() const { return root_; }
  std::string Path(const std::string& name) const { return root_ + "/" + name; }
  // Makes the folders. Fails with a sentence when the state directory cannot hold them.
  Status Create() const;

  Status WriteLease(const Lease& lease) const;
  // The lease file's word: nullopt when it is missing or cannot be read (the caller keeps what it
  // knew), an unarmed Lease when it says "none".
  std::optional<Lease> ReadLease() const;

  Status GuardTask(const GuardedTask& task) const;
  // The record of one task, if it is guarded.
  std::optional<GuardedTask> Guarded(const std::string& task_id) const;
  void ReleaseTask(const std::string& task_id) const;
  std::vector<GuardedTask> GuardedTasks() const;

  Status MarkFenced(const std::string& task_id, const std::string& why) const;
  // Why the keeper stopped the task, if it did.
  std::optional<std::string> FencedBecause(const std::string& task_id) const;
  void ForgetFenced(const std::string& task_id) const;
  // How task `task_id`'s process `pid` ended (waitpid's status), as the keeper saw it from the
  // kernel's exit reports (exit_watcher.h): kept for an agent that was not running then (a
  // restart, an upgrade), which reads it instead of "ended while the agent was down; its exit
  // status is unknown". KeptExit answers only for the same pid.
  Status KeepExit(const std::string& task_id, pid_t pid, int status) const;
  std::optional<int> KeptExit(const std::string& task_id, pid_t pid) const;
  void ForgetKeptExit(const std::string& task_id) const;
  void AppendLog(const std::string& json_line) const;

 private:
  Status Replace(const std::string& path, const std::string& text) const;

  std::string state_dir_;
  std::string root_;
};

// An open lock file held (flock) until this goes away. Move-only.
class HeldLock {
 public:
  HeldLock() = default;
  // Takes the lock on `path` (created if missing) without waiting; nullopt when another holds it.
  static std::optional<HeldLock> TryTake(const std::string& path);
  HeldLock(HeldLock&& other) noexcept;
  HeldLock& operator=(HeldLock&& other) noexcept;
  HeldLock(const HeldLock&) = delete;
  HeldLock& operator=(const HeldLock&) = delete;
  ~HeldLock();

 private:
  explicit HeldLock(int fd) : fd_(fd) {}
  int fd_ = -1;
};

// Whether someone holds the lock on `path` now (false when the file does not exist).
bool LockHeld(const std::string& path);

}  // namespace hangar::agent::fence
