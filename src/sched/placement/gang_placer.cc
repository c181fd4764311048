#include "sched/placement/gang_placer.h"

#include <algorithm>
#include <atomic>
#include <limits>
#include <numeric>
#include <unordered_map>
#include <utility>

namespace hangar::sched::placement {

using cluster::ClusterUsage;
using cluster::DomainUsage;
using cluster::GangAssignment;
using cluster::Level;
using cluster::Topology;

struct GangPlacer::Ctx {
  ClusterUsage& u;
  const Topology& t;
  const GangRequest& req;
  const PlaceOptions& o;
  FitOptions fit;
  GangAssignment acc;
  // Health ranking (NodeRank): in the first pass only nodes of rank <= max_rank are considered,
  // so suspect, degraded and slower-band nodes come last across leaves and domains, not only
  // within one leaf. `skipped` records that a node that fits was passed over for its rank.
  int max_rank = std::numeric_limits<int>::max();
  bool skipped = false;
  // Replicas placed so far per (group, node), for groups with a max_per_node only.
  std::unordered_map<uint64_t, int32_t> on_node;

  static uint64_t Key(size_t group, uint32_t node) { return (uint64_t{group} << 32) | node; }
  bool NodeTakesAnother(size_t group, uint32_t node) const {
    const GroupRequest& g = req.groups[group];
    if (g.max_per_node == 0) return true;
    auto it = on_node.find(Key(group, node));
    return g.NodeTakesAnother(it == on_node.end() ? 0 : it->second);
  }
  void Count(size_t group, uint32_t node, int32_t delta) {
    if (req.groups[group].max_per_node > 0) on_node[Key(group, node)] += delta;
  }
};

namespace {

// Sum of the node aggregates over a node range (for multi-node NVLink domains, which have no
// DomainUsage of their own).
DomainUsage SumNodes(const ClusterUsage& u, uint32_t begin, uint32_t end) {
  DomainUsage d;
  for (uint32_t n = begin; n < end; ++n) {
    const auto& nu = u.node(n);
    if (!nu.condition.schedulable) continue;
    d.free_milli += nu.free_milli;
    d.free_whole += nu.free_whole;
    d.max_node_free_whole = std::max(d.max_node_free_whole, nu.free_whole);
    d.max_gpu_free_milli = std::max(d.max_gpu_free_milli, nu.max_gpu_free_milli);
    d.schedulable_nodes++;
  }
  return d;
}

int64_t RangeWholeCapacity(const ClusterUsage& u, uint32_t begin, uint32_t end, int gpus) {
  int64_t cap = 0;
  for (uint32_t n = begin; n < end; ++n) {
    if (u.node(n).condition.schedulable) cap += u.node(n).free_whole / gpus;
  }
  return cap;
}

// A node's place in the health order: 0 clean, then a slower performance band (validation within
// the fleet's tolerance but not at its median), then suspect, then degraded. Lower is better.
int NodeRank(const cluster::NodeCondition& c) { return 2 * c.penalty + (c.band > 0 ? 1 : 0); }

uint64_t NextPass() {
  static std::atomic<uint64_t> next{1};
  return next.fetch_add(1, std::memory_order_relaxed);
}

Level ChildLevel(Level l) { return l == Level::kCluster ? Level::kSpine : Level::kLeaf; }

std::pair<uint32_t, uint32_t> ChildRange(const Topology& t, Level level, uint32_t d) {
  if (level == Level::kCluster) return {0, static_cast<uint32_t>(t.spines().size())};
  return {t.spines()[d].first_child, t.spines()[d].end_child};
}

}  // namespace

bool GangPlacer::DomainMayHost(const Ctx& c, Level level, uint32_t d, Hosting what) const {
  const bool whole_gang = what == Hosting::kWholeGang;
  DomainUsage agg;
  const bool summed = level == Level::kNvlinkDomain;
  if (summed) {
    auto [b, e] = c.t.NodeRange(level, d);
    agg = SumNodes(c.u, b, e);
  } else {
    agg = c.u.domain(level, d);
  }
  if (agg.schedulable_nodes == 0) return false;
  int64_t whole_needed = 0;
  int64_t shared_needed = 0;
  for (const auto& g : c.req.groups) {
    const TaskShape& s = g.shape;
    const int32_t n = whole_gang ? g.replicas : 1;
    switch (s.kind) {
      case job::GpuKind::kWhole: {
        if (agg.max_node_free_whole < s.gpus) return false;
        whole_needed += int64_t{s.gpus} * n;
        if (whole_gang && g.max_per_node > 0 && agg.schedulable_nodes * g.max_per_node < n)
          return false;
        if (whole_gang) {
          auto [b, e] = c.t.NodeRange(level, d);
          const int64_t cap = summed ? RangeWholeCapacity(c.u, b, e, s.gpus)
                                     : c.u.WholeGpuCapacity(level, d, s.gpus);
          if (cap < n) return false;
        }
        break;
      }
      case job::GpuKind::kShared:
        if (agg.max_gpu_free_milli < s.milli) return false;
        shared_needed += int64_t{s.milli} * n;
        break;
      default:
        break;
    }
  }
  return agg.free_whole >= whole_needed && agg.free_milli >= whole_needed * 1000 + shared_needed;
}

std::vector<uint32_t> GangPlacer::OrderedChildren(const Ctx& c, Level level, uint32_t parent,
                                                  Hosting what) const {
  const Level child = ChildLevel(level);
  auto [b, e] = ChildRange(c.t, level, parent);
  std::vector<uint32_t> out;
  for (uint32_t d = b; d < e; ++d) {
    if (DomainMayHost(c, child, d, what)) out.push_back(d);
  }
  // Fullest first: packing keeps the emptiest domains whole for the big gangs to come.
  std::stable_sort(out.begin(), out.end(), [&](uint32_t x, uint32_t y) {
    return c.u.domain(child, x).free_milli < c.u.domain(child, y).free_milli;
  });
  return out;
}

bool GangPlacer::AllocateReplica(Ctx& c, uint32_t node, size_t group, uint32_t gpu) {
  const GroupRequest& g = c.req.groups[group];
  one_.tasks.clear();
  one_.grants.clear();
  ChooseGpus(c.u, node, g.shape, gpu, &one_.grants);
  cluster::TaskPlacement task;
  task.node = node;
  task.group = static_cast<uint16_t>(group);
  task.replica = replica_of_group_[group];
  task.milli_cpu = g.shape.milli_cpu;
  task.memory_mib = g.shape.memory_mib;
  task.first_grant = 0;
  task.end_grant = static_cast<uint32_t>(one_.grants.size());
  one_.tasks.push_back(task);
  if (!c.u.Allocate(one_).ok()) return false;
  task.first_grant = static_cast<uint32_t>(c.acc.grants.size());
  c.acc.grants.insert(c.acc.grants.end(), one_.grants.begin(), one_.grants.end());
  task.end_grant = static_cast<uint32_t>(c.acc.grants.size());
  c.acc.tasks.push_back(task);
  c.Count(group, node, 1);
  replica_of_group_[group]++;
  return true;
}

void GangPlacer::Rollback(Ctx& c, size_t mark) {
  while (c.acc.tasks.size() > mark) {
    const cluster::TaskPlacement task = c.acc.tasks.back();
    one_.tasks.assign(1, task);
    one_.tasks[0].first_grant = 0;
    one_.tasks[0].end_grant = task.end_grant - task.first_grant;
    one_.grants.assign(c.acc.grants.begin() + task.first_grant,
                       c.acc.grants.begin() + task.end_grant);
    c.u.Release(one_);
    c.acc.grants.resize(task.first_grant);
    c.acc.tasks.pop_back();
    c.Count(task.group, task.node, -1);
    replica_of_group_[task.group]--;
  }
}

bool GangPlacer::PlaceReplica(Ctx& c, uint32_t begin, uint32_t end, size_t group) {
  const GroupRequest& g = c.req.groups[group];
  ScoreContext sc{&c.u, c.o.profile, c.o.seed, nonce_++, NextPass()};
  bool found = false;
  uint32_t best = 0, best_gpu = kNoGpu;
  int64_t best_score = 0;
  int best_rank = 0, best_stage = 0;
  for (uint32_t n = begin; n < end;) {
    // Skip a whole leaf that cannot host one replica.
    const uint32_t leaf = c.t.nodes()[n].leaf;
    const uint32_t leaf_end = std::min(end, c.t.leaves()[leaf].end_node);
    if (leaf_end - n > 1 && !DomainMayHost(c, Level::kLeaf, leaf, Hosting::kOneReplica)) {
      n = leaf_end;
      continue;
    }
    for (; n < leaf_end; ++n) {
      if (!c.NodeTakesAnother(group, n)) continue;
      if (CheckNode(c.u, n, g, c.fit) != FitFailure::kFits) continue;
      const int rank = NodeRank(c.u.node(n).condition);
      if (rank > c.max_rank) {
        c.skipped = true;
        continue;
      }
      uint32_t gpu = kNoGpu;
      const int64_t score = c.o.scorer->Score(sc, n, g.shape, &gpu);
      const int stage = c.o.staging_s && n < c.o.staging_s->size() ? (*c.o.staging_s)[n] : 0;
      if (!found || rank < best_rank || (rank == best_rank && stage < best_stage) ||
          (rank == best_rank && stage == best_stage && score > best_score)) {
        found = true;
        best = n;
        best_gpu = gpu;
        best_score = score;
        best_rank = rank;
        best_stage = stage;
      }
    }
  }
  return found && AllocateReplica(c, best, group, best_gpu);
}

bool GangPlacer::PlaceSingle(Ctx& c) {
  for (uint32_t spine : OrderedChildren(c, Level::kCluster, 0, Hosting::kOneReplica)) {
    for (uint32_t leaf : OrderedChildren(c, Level::kSpine, spine, Hosting::kOneReplica)) {
      const auto& l = c.t.leaves()[leaf];
      if (PlaceReplica(c, l.first_node, l.end_node, 0)) return true;
    }
  }
  return false;
}

// include_nodes: one replica on each named node first (of the first group, in order, that has
// replicas left and fits there), then the rest wherever they fit. The nodes are the user's
// choice, so no smaller domain is sought; a required topology is checked on the result.
bool GangPlacer::PlaceIncluding(Ctx& c) {
  std::vector<int32_t> left;
  for (const auto& g : c.req.groups) left.push_back(g.replicas);
  bool ok = true;
  for (size_t i = 0; ok && i < c.req.nodes.required.size(); ++i) {
    const uint32_t n = c.req.nodes.required[i];
    ok = false;
    for (size_t gi = 0; !ok && gi < left.size(); ++gi) {
      if (left[gi] > 0 && PlaceInRange(c, n, n + 1, gi, 1)) ok = true, --left[gi];
    }
  }
  const uint32_t nodes = static_cast<uint32_t>(c.t.nodes().size());
  for (size_t gi = 0; ok && gi < left.size(); ++gi) ok = PlaceInRange(c, 0, nodes, gi, left[gi]);
  if (ok && c.req.topology.required) {
    Level most = c.req.topology.same;
    if (most == Level::kNvlinkDomain && !c.t.has_multi_node_nvlink()) most = Level::kNode;
    ok = LocalityOf(c.t, c.acc) <= most;
  }
  if (!ok) Rollback(c, 0);
  return ok;
}

bool GangPlacer::PlaceInRange(Ctx& c, uint32_t begin, uint32_t end, size_t group,
                              int32_t replicas) {
  for (int32_t r = 0; r < replicas; ++r) {
    if (!PlaceReplica(c, begin, end, group)) return false;
  }
  return true;
}

bool GangPlacer::PlaceOnOneNode(Ctx& c) {
  int64_t cpu = 0, mem = 0;
  for (const auto& g : c.req.groups) {
    if (!g.NodeTakesAnother(g.replicas - 1)) return false;  // max_per_node splits it
    cpu += g.shape.milli_cpu * g.replicas;
    mem += g.shape.memory_mib * g.replicas;
  }
  for (uint32_t spine : OrderedChildren(c, Level::kCluster, 0, Hosting::kOneReplica)) {
    for (uint32_t leaf : OrderedChildren(c, Level::kSpine, spine, Hosting::kOneReplica)) {
      const auto& l = c.t.leaves()[leaf];
      std::vector<uint32_t> nodes;
      for (uint32_t n = l.first_node; n < l.end_node; ++n) {
        const auto& nu = c.u.node(n);
        if (nu.condition.schedulable && nu.free_whole >= c.req.total_whole_gpus &&
            nu.free_cpu >= cpu && nu.free_memory >= mem) {
          if (NodeRank(nu.condition) > c.max_rank) {
            c.skipped = true;
            continue;
          }
          nodes.push_back(n);
        }
      }
      std::stable_sort(nodes.begin(), nodes.end(), [&](uint32_t x, uint32_t y) {
        const auto& a = c.u.node(x);
        const auto& b = c.u.node(y);
        return std::make_pair(NodeRank(a.condition), a.free_milli) <
               std::make_pair(NodeRank(b.condition), b.free_milli);
      });
      for (uint32_t n : nodes) {
        const size_t mark = c.acc.tasks.size();
        bool ok = true;
        for (size_t gi = 0; ok && gi < c.req.groups.size(); ++gi) {
          ok = PlaceInRange(c, n, n + 1, gi, c.req.groups[gi].replicas);
        }
        if (ok) return true;
        Rollback(c, mark);
      }
    }
  }
  return false;
}

bool GangPlacer::PlaceSplit(Ctx& c, Level level, uint32_t d, size_t group, int32_t replicas) {
  const TaskShape& s = c.req.groups[group].shape;
  if (s.kind != job::GpuKind::kWhole) return false;
  const Level child = ChildLevel(level);
  auto [b, e] = ChildRange(c.t, level, d);
  std::vector<std::pair<int64_t, uint32_t>> caps;  // (capacity, child)
  for (uint32_t x = b; x < e; ++x) {
    int64_t cap = c.u.WholeGpuCapacity(child, x, s.gpus);
    if (const int32_t per = c.req.groups[group].max_per_node; per > 0)
      cap = std::min(cap, int64_t{c.u.domain(child, x).schedulable_nodes} * per);
    if (cap > 0) caps.emplace_back(cap, x);
  }
  std::stable_sort(caps.begin(), caps.end(),
                   [](const auto& x, const auto& y) { return x.first > y.first; });
  std::vector<std::pair<uint32_t, int32_t>> chosen;  // (child, share)
  int32_t left = replicas;
  size_t i = 0;
  for (; i < caps.size() && left > 0; ++i) {
    // Best-fit tail: when the rest fits one child, take the smallest child that holds it.
    if (caps[i].first >= left) {
      size_t best = i;
      for (size_t j = i + 1; j < caps.size() && caps[j].first >= left; ++j) best = j;
      chosen.emplace_back(caps[best].second, left);
      left = 0;
      break;
    }
    chosen.emplace_back(caps[i].second, static_cast<int32_t>(caps[i].first));
    left -= static_cast<int32_t>(caps[i].first);
  }
  if (left > 0) return false;
  const size_t mark = c.acc.tasks.size();
  for (const auto& [x, share] : chosen) {
    auto [nb, ne] = c.t.NodeRange(child, x);
    bool ok = child == Level::kLeaf ? PlaceInRange(c, nb, ne, group, share)
                                    : (PlaceSplit(c, child, x, group, share) ||
                                       PlaceInRange(c, nb, ne, group, share));
    if (!ok) {
      Rollback(c, mark);
      return false;
    }
  }
  return true;
}

bool GangPlacer::PlaceAtLevel(Ctx& c, Level level) {
  std::vector<uint32_t> domains;
  const uint32_t count = c.t.NumDomains(level);
  for (uint32_t d = 0; d < count; ++d) {
    if (level == Level::kNvlinkDomain && !c.t.nvlink_domains()[d].multi_node) continue;
    if (DomainMayHost(c, level, d, Hosting::kWholeGang)) domains.push_back(d);
  }
  auto free_of = [&](uint32_t d) {
    if (level == Level::kNvlinkDomain) {
      auto [b, e] = c.t.NodeRange(level, d);
      return SumNodes(c.u, b, e).free_milli;
    }
    return c.u.domain(level, d).free_milli;
  };
  std::stable_sort(domains.begin(), domains.end(),
                   [&](uint32_t x, uint32_t y) { return free_of(x) < free_of(y); });
  const bool split =
      (level == Level::kSpine || level == Level::kCluster) && c.req.groups.size() == 1;
  for (uint32_t d : domains) {
    const size_t mark = c.acc.tasks.size();
    auto [b, e] = c.t.NodeRange(level, d);
    bool ok = split && PlaceSplit(c, level, d, 0, c.req.groups[0].replicas);
    if (!ok) {
      ok = true;
      for (size_t gi = 0; ok && gi < c.req.groups.size(); ++gi) {
        ok = PlaceInRange(c, b, e, gi, c.req.groups[gi].replicas);
      }
    }
    if (ok) return true;
    Rollback(c, mark);
  }
  return false;
}

PlaceResult GangPlacer::Place(ClusterUsage& usage, const GangRequest& req, const PlaceOptions& o) {
  Ctx c{usage, usage.topology(), req, o, {}, {}};
  c.fit.gang = req.total_replicas > 1;
  c.fit.single_nvlink = req.topology.required && req.topology.same == Level::kNvlinkDomain;
  c.fit.excluded = o.excluded;
  replica_of_group_.assign(req.groups.size(), 0);
  PlaceResult result;
  // First only clean nodes (rank 0), at every level; then, when that passed over a node for its
  // health, everything, best rank first within each choice. Hardware that is suspect, degraded
  // or in a slower performance band is so ranked last across the whole cluster: a gang runs at
  // the pace of its slowest member. With no such node the first pass is the whole search.
  for (const int max_rank : {0, std::numeric_limits<int>::max()}) {
    c.max_rank = max_rank;
    c.skipped = false;
    if (!req.nodes.required.empty()) {
      result.placed = PlaceIncluding(c);
    } else if (req.total_replicas == 1) {
      result.placed = PlaceSingle(c);
    } else {
      const Level max_level = req.topology.required ? req.topology.same : Level::kCluster;
      for (Level level :
           {Level::kNvlinkDomain, Level::kNode, Level::kLeaf, Level::kSpine, Level::kCluster}) {
        if (level > max_level && !(max_level == Level::kNvlinkDomain && level == Level::kNode &&
                                   !c.t.has_multi_node_nvlink())) {
          break;
        }
        if (level == Level::kNvlinkDomain && !c.t.has_multi_node_nvlink()) continue;
        result.placed = level == Level::kNode ? PlaceOnOneNode(c) : PlaceAtLevel(c, level);
        if (result.placed) break;
      }
    }
    if (result.placed || !c.skipped) break;
  }
  if (result.placed) {
    result.locality = LocalityOf(c.t, c.acc);
    result.assignment = std::move(c.acc);
  }
  return result;
}

Level LocalityOf(const Topology& t, const GangAssignment& a) {
  if (a.tasks.empty()) return Level::kCluster;
  if (!a.grants.empty()) {
    const uint32_t d = t.gpus()[a.grants[0].gpu].nvlink_domain;
    bool same = true;
    for (const auto& g : a.grants) same = same && t.gpus()[g.gpu].nvlink_domain == d;
    if (same) return Level::kNvlinkDomain;
  }
  for (Level level : {Level::kNode, Level::kLeaf, Level::kSpine}) {
    const uint32_t d = t.DomainOf(a.tasks[0].node, level);
    bool same = true;
    for (const auto& task : a.tasks) same = same && t.DomainOf(task.node, level) == d;
    if (same) return level;
  }
  return Level::kCluster;
}

}  // namespace hangar::sched::placement
