// The agent's side of the node fence: it holds agent.lock while the agent runs, turns the
// controller's lease grants into the lease file, and keeps a fence keeper running while a lease is
// armed (fence_keeper.h). Thread-safe.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "agent/fence/fence_dir.h"
#include "common/mutex.h"
#include "common/status.h"

namespace hangar::agent::fence {

class NodeFence {
 public:
  NodeFence(const std::string& state_dir, std::string hangar_binary);

  // Takes agent.lock, waiting up to 2 s for a keeper that is exiting to let it go; fails with a
  // sentence when another agent holds it. Reads the lease an earlier agent left, and makes sure a
  // keeper guards it.
  Status Open() HANGAR_EXCLUDES(mu_);
  // The controller granted a lease: tasks may run until clock_ms (the lease clock when the agent
  // asked, never later than now) + lease_ms. Only ever extends; lease_ms 0 disarms the fence (that
  // controller fences no node). Starts a keeper when none runs.
  void Grant(int64_t clock_ms, int64_t lease_ms) HANGAR_EXCLUDES(mu_);
  // The deadline on the lease clock (Lease::kNone when unarmed).
  int64_t deadline() const HANGAR_EXCLUDES(mu_);
  // Why the keeper stopped this task, if it did; Forget drops that record.
  std::optional<std::string> FencedBecause(const std::string& task_id) const {
    return dir_.FencedBecause(task_id);
  }
  void ForgetFenced(const std::string& task_id) const { dir_.ForgetFenced(task_id); }

 private:
  void EnsureKeeper() HANGAR_REQUIRES(mu_);

  std::string state_dir_;
  FenceDir dir_;
  std::string binary_;
  std::optional<HeldLock> agent_lock_;
  mutable Mutex mu_;  // everything below
  Lease lease_ HANGAR_GUARDED_BY(mu_);
  // Keepers this process started (reaped when they exit).
  std::vector<pid_t> keepers_ HANGAR_GUARDED_BY(mu_);
  std::string keeper_error_ HANGAR_GUARDED_BY(mu_);  // the last failure to start one (logged once)
};

}  // namespace hangar::agent::fence
