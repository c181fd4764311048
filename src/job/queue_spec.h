// Queues as declared in queues.yaml (docs/queues.md) and applied with `hangar apply -f`: a tree
// (organisation -> team -> queue). Jobs are submitted to leaf queues. Each queue has a guaranteed
// quota per resource (GPUs, or GPUs of a model; CPU; memory), a borrowing limit (how much more it
// may take of what siblings do not use), a lending limit (how much of its unused guarantee others
// may take) and a fair-share weight. A group's quota is the sum of its children's unless it says.
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "common/time.h"

namespace hangar::job {

// Amounts per resource; unset means "no limit" (for limits) or "nothing guaranteed" (quota).
struct ResourceAmounts {
  std::optional<int64_t> gpus_milli;                   // GPUs of any model
  std::map<std::string, int64_t> gpus_milli_by_model;  // GPUs of one model
  std::optional<int64_t> milli_cpu;
  std::optional<int64_t> memory_mib;
  bool empty() const {
    return !gpus_milli && gpus_milli_by_model.empty() && !milli_cpu && !memory_mib;
  }
};

struct IdlePolicy {
  enum class Action : uint8_t { kNone, kCheckpointRequeue, kStop, kNotify };
  int gpu_util_below = -1;  // percent; -1: no idle policy
  Duration for_duration = 0;
  Action action = Action::kNone;
};
std::string_view IdleActionName(IdlePolicy::Action a);

struct QueueSpec {
  std::string name;
  ResourceAmounts quota;
  ResourceAmounts borrowing_limit;
  ResourceAmounts lending_limit;
  int weight = 1;
  IdlePolicy idle;
  std::vector<std::string> users;   // may submit (RBAC); inherited by children
  std::vector<std::string> admins;  // queue-admins of this subtree
  // Whether jobs whose tokens map to root (uid 0) may run in this subtree (docs/rbac.md); unset:
  // as the parent says, and no at the top.
  std::optional<bool> allow_root;
  std::vector<QueueSpec> children;
  bool leaf() const { return children.empty(); }
};

// Parses `queues: [...]`. Names are unique across the whole tree. Errors say file:line.
StatusOr<std::vector<QueueSpec>> ParseQueues(std::string_view text, const std::string& source_name);
nlohmann::json QueuesToJson(const std::vector<QueueSpec>& queues);
// Whether queue `name` lets tasks run as root: the nearest `allow_root` on its path from the
// root of the tree; false when none says, or when there is no such queue.
bool AllowsRoot(const std::vector<QueueSpec>& queues, std::string_view name);
// The default when nothing was applied: one leaf queue "default" with no quota (everything it
// runs is borrowed from the idle pool) and weight 1.
std::vector<QueueSpec> DefaultQueues();

}  // namespace hangar::job
