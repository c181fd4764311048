#include "sched/placement/replacement.h"

#include <algorithm>

namespace hangar::sched {

std::optional<uint32_t> PickReplacement(const cluster::Topology& topo, uint32_t failed,
                                        const job::TopologyConstraint& rule,
                                        const std::function<bool(uint32_t)>& usable) {
  using cluster::Level;
  const Level widest = rule.required && rule.same >= Level::kLeaf ? rule.same : Level::kCluster;
  for (Level level : {Level::kLeaf, Level::kSpine, Level::kCluster}) {
    if (level > widest) break;
    const auto [first, end] =
        level == Level::kCluster
            ? std::pair<uint32_t, uint32_t>{0, static_cast<uint32_t>(topo.nodes().size())}
            : topo.NodeRange(level, topo.DomainOf(failed, level));
    for (uint32_t n = first; n < end; ++n) {
      if (usable(n)) return n;
    }
  }
  return std::nullopt;
}

bool NodeTakesTask(const cluster::ClusterUsage& usage, uint32_t to,
                   const cluster::GangAssignment& a, size_t k) {
  const cluster::TaskPlacement& t = a.tasks[k];
  const cluster::Topology& topo = usage.topology();
  const cluster::NodeInfo& from = topo.nodes()[t.node];
  const cluster::NodeInfo& node = topo.nodes()[to];
  if (node.num_gpus != from.num_gpus || node.model != from.model) return false;
  const cluster::NodeUsage& u = usage.node(to);
  if (u.free_cpu < t.milli_cpu || u.free_memory < t.memory_mib) return false;
  for (const cluster::GpuGrant& g : a.GrantsOf(t)) {
    const uint32_t gpu = node.first_gpu + (g.gpu - from.first_gpu);
    if (!usage.gpu_available(gpu) || usage.gpu_free_milli(gpu) < g.milli ||
        usage.gpu_free_memory(gpu) < g.memory_mib) {
      return false;
    }
  }
  return true;
}

namespace {

// Appends task `t` (its grants from `src`) to `out`, on node `to`.
void AppendTask(const cluster::Topology& topo, const cluster::GangAssignment& src,
                const cluster::TaskPlacement& t, uint32_t to, cluster::GangAssignment* out) {
  cluster::TaskPlacement moved = t;
  moved.node = to;
  moved.first_grant = static_cast<uint32_t>(out->grants.size());
  for (cluster::GpuGrant g : src.GrantsOf(t)) {
    g.gpu = topo.nodes()[to].first_gpu + (g.gpu - topo.nodes()[t.node].first_gpu);
    out->grants.push_back(g);
  }
  moved.end_grant = static_cast<uint32_t>(out->grants.size());
  out->tasks.push_back(moved);
}

}  // namespace

cluster::GangAssignment MoveTasks(const cluster::Topology& topo, const cluster::GangAssignment& a,
                                  const std::vector<std::pair<size_t, uint32_t>>& moves) {
  cluster::GangAssignment out;
  for (size_t k = 0; k < a.tasks.size(); ++k) {
    uint32_t to = a.tasks[k].node;
    for (const auto& [task, node] : moves) {
      if (task == k) to = node;
    }
    AppendTask(topo, a, a.tasks[k], to, &out);
  }
  return out;
}

cluster::GangAssignment WithoutTasks(const cluster::GangAssignment& a,
                                     const std::vector<size_t>& drop) {
  cluster::GangAssignment out;
  for (size_t k = 0; k < a.tasks.size(); ++k) {
    if (std::find(drop.begin(), drop.end(), k) != drop.end()) continue;
    cluster::TaskPlacement t = a.tasks[k];
    t.first_grant = static_cast<uint32_t>(out.grants.size());
    for (const cluster::GpuGrant& g : a.GrantsOf(a.tasks[k])) out.grants.push_back(g);
    t.end_grant = static_cast<uint32_t>(out.grants.size());
    out.tasks.push_back(t);
  }
  return out;
}

}  // namespace hangar::sched
