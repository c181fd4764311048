#include "agent/fence/node_fence.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <thread>

#include "agent/fence/fence_keeper.h"

namespace hangar::agent::fence {

NodeFence::NodeFence(const std::string& state_dir, std::string hangar_binary)
    : state_dir_(state_dir), dir_(state_dir), binary_(std::move(hangar_binary)) {}

Status NodeFence::Open() {
  HANGAR_RETURN_IF_ERROR(dir_.Create());
  for (int i = 0; i < 40 && !agent_lock_; ++i) {
    agent_lock_ = HeldLock::TryTake(dir_.Path("agent.lock"));
    if (!agent_lock_) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  if (!agent_lock_) {
    return Status::FailedPrecondition(
        "another agent runs with this state directory (" + dir_.Path("agent.lock") +
        " is locked); stop it first, or give this one another --state-dir");
  }
  MutexLock l(mu_);
  if (auto left = dir_.ReadLease()) lease_ = *left;
  if (lease_.armed()) EnsureKeeper();
  return Status::Ok();
}

void NodeFence::Grant(int64_t clock_ms, int64_t lease_ms) {
  MutexLock l(mu_);
  if (lease_ms <= 0) {
    if (!lease_.armed()) return;
    lease_ = Lease{};
    if (Status s = dir_.WriteLease(lease_); !s.ok()) spdlog::error("agent: {}", s.message());
    spdlog::info("agent: the controller fences no node: this node's tasks run without a lease");
    return;
  }
  const int64_t deadline = std::min(clock_ms, LeaseClockMs()) + lease_ms;
  if (lease_.armed() && deadline <= lease_.deadline_ms) return;
  if (!lease_.armed())
    spdlog::info(
        "agent: node lease of {} ms: tasks stop if the controller is not heard for that long",
        lease_ms);
  lease_.deadline_ms = deadline;
  lease_.term_grace_ms = std::min<int64_t>(1000, lease_ms / 4);
  // Written before the keeper is asked for: a keeper that starts reads it.
  if (Status s = dir_.WriteLease(lease_); !s.ok()) spdlog::error("agent: {}", s.message());
  EnsureKeeper();
}

int64_t NodeFence::deadline() const {
  MutexLock l(mu_);
  return lease_.deadline_ms;
}

void NodeFence::EnsureKeeper() {
  Status s = EnsureFenceKeeper(state_dir_, binary_, &keepers_);
  if (s.ok()) {
    keeper_error_.clear();
    return;
  }
  if (s.message() != keeper_error_) {
    spdlog::error("agent: the node's tasks are not fenced: {}", s.message());
    keeper_error_ = s.message();
  }
}

}  // namespace hangar::agent::fence
