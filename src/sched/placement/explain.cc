// Why a gang cannot run: never (the cluster could not hold it even empty) or not now (with the
// rule and the numbers). Only called for jobs that failed to place, at most once per request
// shape per cycle, so a scan over the nodes is affordable here.
#include <algorithm>

#include "sched/placement/gang_placer.h"

namespace hangar::sched::placement {

using cluster::ClusterUsage;
using cluster::Level;
using cluster::Topology;

namespace {

int64_t ShapeGpusMilli(const GroupRequest& g) { return g.shape.MilliGpu() * g.replicas; }

// How far a node gets through the static filters, in the order CheckNodeStatic applies them.
int Stage(FitFailure f) {
  switch (f) {
    case FitFailure::kModel:
      return 0;
    case FitFailure::kMig:
      return 1;
    case FitFailure::kSelector:
      return 2;
    case FitFailure::kGpuMemorySize:
      return 3;
    case FitFailure::kWholeGpus:
      return 4;
    case FitFailure::kCpu:
      return 5;
    case FitFailure::kMemory:
      return 6;
    case FitFailure::kNodeRule:
      return 7;
    default:
      return 8;
  }
}

// The static filter that rules out every node for group g, as a never-reason; kNone when some
// node could take a replica. The numbers come from the nodes that passed every earlier filter.
Reason FirstExcludingFilter(const Topology& t, const GroupRequest& g) {
  const TaskShape& s = g.shape;
  int furthest = -1;
  int64_t best[8] = {0, 0, 0, 0, 0, 0, 0, 0};  // best value seen among nodes reaching stage i (< 7)
  for (uint32_t n = 0; n < t.nodes().size(); ++n) {
    const auto& node = t.nodes()[n];
    const int stage = Stage(CheckNodeStatic(t, n, g));
    if (stage == 8) return Reason{};
    furthest = std::max(furthest, stage);
    if (stage >= 3) best[3] = std::max(best[3], node.gpu_memory_mib);
    if (stage >= 4) best[4] = std::max<int64_t>(best[4], node.num_gpus);
    if (stage >= 5) best[5] = std::max(best[5], node.milli_cpu);
    if (stage >= 6) best[6] = std::max(best[6], node.memory_mib);
  }
  Reason r;
  r.models = s.models;
  r.level = Level::kNode;
  switch (furthest) {
    case -1:
    case 0:
      r.rule = Rule::kNeverModel;
      break;
    case 1:
      r.rule = Rule::kNeverMig;
      break;
    case 2:
      r.rule = Rule::kNeverSelector;
      break;
    case 3:
      r.rule = Rule::kNeverGpuMemory;
      r.need = std::max(s.min_gpu_memory_mib, s.gpu_memory_mib);
      r.have = best[3];
      break;
    case 4:
      r.rule = Rule::kNeverGpusPerReplica;
      r.need = s.gpus;
      r.have = best[4];
      break;
    case 5:
      r.rule = Rule::kNeverCpu;
      r.need = s.milli_cpu;
      r.have = best[5];
      break;
    case 6:
      r.rule = Rule::kNeverMemory;
      r.need = s.memory_mib;
      r.have = best[6];
      break;
    default:
      r.rule = Rule::kNeverExcludedNodes;
      break;
  }
  return r;
}

// A node of include_nodes that no group could ever have a replica on (or that is not in the
// cluster: `other` is then past the last node).
Reason NeverIncluded(const Topology& t, const GangRequest& req) {
  if (req.nodes.required_missing) {
    Reason r;
    r.rule = Rule::kNeverIncludedNode;
    r.other = t.nodes().size();
    return r;
  }
  for (uint32_t n : req.nodes.required) {
    bool any = false;
    for (const auto& g : req.groups) any = any || StaticReplicaCapacity(t, n, g) > 0;
    if (!any) {
      Reason r;
      r.rule = Rule::kNeverIncludedNode;
      r.level = Level::kNode;
      r.other = n;
      return r;
    }
  }
  return Reason{};
}

}  // namespace

namespace {
// A group limited to max_per_node replicas per node needs that many nodes that could hold one.
Reason NeverPerNode(const Topology& t, const GangRequest& req) {
  for (const auto& g : req.groups) {
    if (g.max_per_node == 0) continue;
    int64_t nodes = 0;
    for (uint32_t n = 0; n < t.nodes().size(); ++n) nodes += StaticReplicaCapacity(t, n, g) > 0;
    if (nodes * g.max_per_node < g.replicas) {
      Reason r;
      r.rule = Rule::kNeverPerNode;
      r.level = Level::kNode;
      r.need = g.replicas;
      r.have = nodes;
      r.other = static_cast<uint64_t>(g.max_per_node);
      return r;
    }
  }
  return {};
}
}  // namespace

Reason CheckNever(const Topology& t, const GangRequest& req) {
  for (const auto& g : req.groups) {
    Reason r = FirstExcludingFilter(t, g);
    if (r.rule != Rule::kNone) return r;
  }
  if (Reason r = NeverIncluded(t, req); r.rule != Rule::kNone) return r;
  if (Reason r = NeverPerNode(t, req); r.rule != Rule::kNone) return r;
  // Capacity: within one domain of the required level, or in the whole cluster.
  const Level level = req.topology.required ? req.topology.same : Level::kCluster;
  const Level counted =
      level == Level::kNvlinkDomain && !t.has_multi_node_nvlink() ? Level::kNode : level;
  int64_t best_gpus = 0;
  bool fits = false;
  const uint32_t domains = t.NumDomains(counted);
  for (uint32_t d = 0; d < domains && !fits; ++d) {
    auto [b, e] = t.NodeRange(counted, d);
    bool all = true;
    int64_t gpus = 0;
    for (const auto& g : req.groups) {
      int64_t cap = 0, milli = 0;
      for (uint32_t n = b; n < e; ++n) {
        const int64_t c = StaticReplicaCapacity(t, n, g);
        cap += c;
        if (c > 0) milli += int64_t{t.nodes()[n].num_gpus} * cluster::kMilliPerGpu;
      }
      all = all && cap >= g.replicas;
      gpus = std::max(gpus, milli);
    }
    fits = all;
    best_gpus = std::max(best_gpus, gpus);
  }
  if (fits) return Reason{};
  Reason r;
  r.rule = level == Level::kCluster ? Rule::kNeverCluster : Rule::kNeverDomain;
  r.level = counted;
  r.need = req.total_milli_gpu;
  r.have = best_gpus;
  return r;
}

namespace {

// What the nodes whose hardware could take a replica of group `g` have free now.
struct GroupScan {
  int64_t fit_now = 0, blocked_health = 0, blocked_reserved = 0;
  int64_t blocked_rule = 0;   // nodes of exclude_nodes that have room for a replica now
  int64_t blocked_agent = 0;  // nodes with room now whose agents lack a feature it needs
  int64_t max_whole = 0, max_share = 0, max_cpu = -1, max_mem = -1, free_total = 0;
};

GroupScan ScanGroup(const ClusterUsage& u, const GroupRequest& g, const FitOptions& fit,
                    const PlaceOptions& o) {
  const Topology& t = u.topology();
  const TaskShape& s = g.shape;
  GroupScan c;
  GroupRequest unruled;  // g without its exclude_nodes, to tell what the rule keeps it off
  if (!g.excluded_nodes.empty()) {
    unruled = g;
    unruled.excluded_nodes.clear();
  }
  GroupRequest unneeding;  // g without the agent features it needs, to tell what they keep it off
  if (g.agent_needs != 0) {
    unneeding = g;
    unneeding.agent_needs = 0;
  }
  for (uint32_t n = 0; n < t.nodes().size(); ++n) {
    const FitFailure st = CheckNodeStatic(t, n, g);
    if (st == FitFailure::kNodeRule) {
      c.blocked_rule += CheckNode(u, n, unruled, fit) == FitFailure::kFits;
      continue;
    }
    if (st != FitFailure::kFits) continue;
    const auto& nu = u.node(n);
    FitFailure f = CheckNode(u, n, g, fit);
    if (f == FitFailure::kUnschedulable || f == FitFailure::kNoGangs) {
      ++c.blocked_health;
      continue;
    }
    if (f == FitFailure::kAgent) {
      c.blocked_agent += CheckNode(u, n, unneeding, fit) == FitFailure::kFits;
      continue;
    }
    c.max_whole = std::max<int64_t>(c.max_whole, nu.free_whole);
    c.max_share = std::max<int64_t>(c.max_share, nu.max_gpu_free_milli);
    c.free_total += s.kind == job::GpuKind::kWhole ? nu.free_whole * int64_t{cluster::kMilliPerGpu}
                                                   : nu.free_milli;
    const bool gpus_ok =
        f != FitFailure::kWholeGpus && f != FitFailure::kSharedGpu && f != FitFailure::kMig;
    if (gpus_ok) {
      c.max_cpu = std::max(c.max_cpu, nu.free_cpu);
      if (f != FitFailure::kCpu) c.max_mem = std::max(c.max_mem, nu.free_memory);
    }
    if (f != FitFailure::kFits) continue;
    if (o.excluded && (*o.excluded)[n]) {
      ++c.blocked_reserved;
      continue;
    }
    int64_t here = s.kind == job::GpuKind::kWhole ? nu.free_whole / s.gpus : 1;
    if (g.max_per_node > 0) here = std::min<int64_t>(here, g.max_per_node);
    c.fit_now += here;
  }
  return c;
}

// Why group `g`, which does not fit now (per `c`), blocks the gang.
Reason GroupReason(const GangRequest& req, const GroupRequest& g, const GroupScan& c) {
  const TaskShape& s = g.shape;
  Reason r;
  r.need = s.kind == job::GpuKind::kWhole ? s.gpus : s.milli;
  if (c.blocked_rule > 0) {
    r = {Rule::kNotNowExcludedNodes, Level::kNode, g.replicas, c.fit_now};
    r.other = static_cast<uint64_t>(c.blocked_rule);
  } else if (c.blocked_agent > 0) {
    r = {Rule::kNotNowAgentFeature, Level::kNode, g.replicas, c.fit_now};
    r.other = static_cast<uint64_t>(c.blocked_agent);
  } else if (c.blocked_reserved > 0) {
    r.rule = Rule::kNotNowReserved;
  } else if (s.kind == job::GpuKind::kShared && c.max_share < s.milli) {
    r = {Rule::kNotNowShared, Level::kNode, s.milli, c.max_share};
  } else if (s.kind == job::GpuKind::kWhole && c.max_whole < s.gpus) {
    r = {Rule::kNotNowNodeGpus, Level::kNode, s.gpus, c.max_whole};
    if (c.blocked_health > 0 && c.max_whole == 0) r.rule = Rule::kNotNowUnhealthy;
  } else if (c.max_cpu >= 0 && c.max_cpu < s.milli_cpu) {
    r = {Rule::kNotNowCpu, Level::kNode, s.milli_cpu, c.max_cpu};
  } else if (c.max_mem >= 0 && c.max_mem < s.memory_mib) {
    r = {Rule::kNotNowMemory, Level::kNode, s.memory_mib, c.max_mem};
  } else if (c.free_total < ShapeGpusMilli(g)) {
    r = {Rule::kNotNowCluster, Level::kCluster, req.total_milli_gpu, c.free_total};
  } else if (g.replicas > 1 || req.groups.size() > 1) {
    r.rule = Rule::kNotNowReplicas;
    r.need = g.replicas;
    r.have = c.fit_now;
    r.other = static_cast<uint64_t>(s.gpus);
  } else {
    r.rule = c.blocked_health > 0 ? Rule::kNotNowUnhealthy : Rule::kNotNowNodeGpus;
    r.have = c.max_whole;
  }
  return r;
}

}  // namespace

Reason ExplainNotNow(const ClusterUsage& u, const GangRequest& req, const PlaceOptions& o) {
  const Topology& t = u.topology();
  const Level level = req.topology.required ? req.topology.same : Level::kCluster;
  Reason r;
  // A required domain: how much the emptiest such domain has free.
  if (level == Level::kLeaf || level == Level::kSpine) {
    int64_t best = 0;
    for (uint32_t d = 0; d < t.NumDomains(level); ++d)
      best = std::max(best, u.domain(level, d).free_milli);
    if (best < req.total_milli_gpu) {
      r.rule = Rule::kNotNowDomain;
      r.level = level;
      r.need = req.total_milli_gpu;
      r.have = best;
      return r;
    }
  }
  FitOptions fit;
  fit.gang = req.total_replicas > 1;
  // A node the allocation must include that has no room for any group's replica now.
  for (uint32_t n : req.nodes.required) {
    bool room = false;
    for (const auto& g : req.groups) room = room || CheckNode(u, n, g, fit) == FitFailure::kFits;
    if (!room) {
      r.rule = Rule::kNotNowIncludedNode;
      r.level = Level::kNode;
      r.other = n;
      r.have = u.node(n).free_whole;
      return r;
    }
  }
  // Per group: the nodes whose hardware could take a replica, and what they lack now.
  for (const auto& g : req.groups) {
    const GroupScan c = ScanGroup(u, g, fit, o);
    if (c.fit_now < g.replicas) return GroupReason(req, g, c);  // this group blocks
  }
  // Each group fits on its own; together, or within the preferred locality, they do not.
  r.rule = Rule::kNotNowCluster;
  r.need = req.total_milli_gpu;
  int64_t free = 0;
  for (uint32_t n = 0; n < t.nodes().size(); ++n) {
    if (u.node(n).condition.schedulable) free += u.node(n).free_milli;
  }
  r.have = free;
  if (level != Level::kCluster) {
    r.rule = Rule::kNotNowDomain;
    r.level = level;
  }
  return r;
}

}  // namespace hangar::sched::placement
