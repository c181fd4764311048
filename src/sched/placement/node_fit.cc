#include "sched/placement/node_fit.h"

#include <algorithm>
#include <cstdint>

#include "cluster/mig_geometry.h"

namespace hangar::sched::placement {

using cluster::ClusterUsage;
using cluster::GpuInfo;
using cluster::NodeInfo;
using cluster::Topology;

namespace {

bool ModelAllowed(const NodeInfo& node, const TaskShape& s) {
  return node.num_gpus > 0 && (s.models & (cluster::ModelMask{1} << node.model));
}

bool Excluded(uint32_t n, const GroupRequest& g) {
  return !g.excluded_nodes.empty() &&
         std::binary_search(g.excluded_nodes.begin(), g.excluded_nodes.end(), n);
}

bool SelectorMatches(const NodeInfo& node, const GroupRequest& g) {
  for (const auto& kv : g.selector) {
    if (!std::binary_search(node.labels.begin(), node.labels.end(), kv)) return false;
  }
  return true;
}

// Largest number of fully free GPUs within one NVLink domain on node n.
int MaxFreeInOneNvlinkDomain(const ClusterUsage& u, uint32_t n) {
  const Topology& t = u.topology();
  const NodeInfo& node = t.nodes()[n];
  int best = 0;
  for (uint32_t g = node.first_gpu; g < node.first_gpu + node.num_gpus;) {
    const uint32_t d = t.gpus()[g].nvlink_domain;
    int free = 0;
    for (; g < node.first_gpu + node.num_gpus && t.gpus()[g].nvlink_domain == d; ++g) {
      free += u.gpu_available(g) && u.gpu_free_milli(g) == cluster::kMilliPerGpu &&
              u.gpu_free_memory(g) == t.gpus()[g].memory_mib;
    }
    best = std::max(best, free);
  }
  return best;
}

// What one more instance of `shape` costs the GPU's future (MigLayoutValue lost) at its best
// start on `taken`.
uint32_t MigValueLost(uint8_t taken, cluster::MigShape shape, int start) {
  return cluster::MigLayoutValue(taken) -
         cluster::MigLayoutValue(taken | cluster::MigPlacementMask(shape, start));
}

// MIG: the GPU where the instance costs the least of what the node could still place (a GPU
// already cut before an empty one, so whole-GPU 7g/4g homes survive); then the fewest free
// compute slices, then the lowest index.
uint32_t BestMigGpu(const ClusterUsage& u, uint32_t n, const TaskShape& s) {
  const NodeInfo& node = u.topology().nodes()[n];
  uint32_t best = UINT32_MAX;
  uint32_t best_lost = UINT32_MAX;
  int32_t best_free = INT32_MAX;
  for (uint32_t g = node.first_gpu; g < node.first_gpu + node.num_gpus; ++g) {
    if (!GpuFitsShared(u, g, s)) continue;
    const auto shape = static_cast<cluster::MigShape>(MigShapeFor(u.topology(), g, s));
    const uint8_t taken = u.gpu_mig_taken(g);
    const uint32_t lost = MigValueLost(taken, shape, u.MigStartFor(g, shape));
    if (lost < best_lost || (lost == best_lost && u.gpu_free_milli(g) < best_free)) {
      best = g;
      best_lost = lost;
      best_free = u.gpu_free_milli(g);
    }
  }
  return best;
}

}  // namespace

uint8_t MigShapeFor(const Topology& t, uint32_t g, const TaskShape& s) {
  return s.mig_shape[t.gpus()[g].mig_part];
}

bool GpuFitsShared(const ClusterUsage& u, uint32_t g, const TaskShape& s) {
  const GpuInfo& gi = u.topology().gpus()[g];
  if (!u.gpu_available(g) || gi.memory_mib < s.min_gpu_memory_mib) return false;
  if (s.kind == job::GpuKind::kMig) {
    const uint8_t shape = MigShapeFor(u.topology(), g, s);
    return gi.mig && shape != cluster::kNoMigShape && (u.MigPlaceable(g) >> shape & 1);
  }
  return !gi.mig && u.gpu_free_milli(g) >= s.milli && u.gpu_free_memory(g) >= s.gpu_memory_mib;
}

uint32_t BestFitSharedGpu(const ClusterUsage& u, uint32_t n, const TaskShape& s) {
  if (s.kind == job::GpuKind::kMig) return BestMigGpu(u, n, s);
  const NodeInfo& node = u.topology().nodes()[n];
  uint32_t best = UINT32_MAX;
  int32_t best_free = INT32_MAX;
  for (uint32_t g = node.first_gpu; g < node.first_gpu + node.num_gpus; ++g) {
    if (GpuFitsShared(u, g, s) && u.gpu_free_milli(g) < best_free) {
      best = g;
      best_free = u.gpu_free_milli(g);
    }
  }
  return best;
}

FitFailure CheckNode(const ClusterUsage& u, uint32_t n, const GroupRequest& g,
                     const FitOptions& opts) {
  const cluster::NodeUsage& nu = u.node(n);
  const NodeInfo& node = u.topology().nodes()[n];
  const TaskShape& s = g.shape;
  if (!nu.condition.schedulable) return FitFailure::kUnschedulable;
  if (opts.gang && !nu.condition.gangs_allowed) return FitFailure::kNoGangs;
  if (opts.excluded && (*opts.excluded)[n]) return FitFailure::kExcluded;
  if (Excluded(n, g)) return FitFailure::kNodeRule;
  if (g.agent_needs & nu.condition.agent_lacks) return FitFailure::kAgent;
  if (s.NeedsGpu()) {
    if (!ModelAllowed(node, s)) return FitFailure::kModel;
    if (node.gpu_memory_mib < s.min_gpu_memory_mib) return FitFailure::kGpuMemorySize;
  }
  if (!g.selector.empty() && !SelectorMatches(node, g)) return FitFailure::kSelector;
  switch (s.kind) {
    case job::GpuKind::kNone:
      break;
    case job::GpuKind::kWhole:
      if (nu.free_whole < s.gpus) return FitFailure::kWholeGpus;
      if (opts.single_nvlink && MaxFreeInOneNvlinkDomain(u, n) < s.gpus)
        return FitFailure::kWholeGpus;
      break;
    case job::GpuKind::kShared:
      if (nu.max_gpu_free_milli < s.milli || BestFitSharedGpu(u, n, s) == UINT32_MAX) {
        return FitFailure::kSharedGpu;
      }
      break;
    case job::GpuKind::kMig: {
      // A node's GPUs are one model, so one part: its shape for s, against what the node can
      // still place.
      const uint8_t shape = MigShapeFor(u.topology(), node.first_gpu, s);
      if (shape == cluster::kNoMigShape || !(nu.mig_shapes >> shape & 1)) return FitFailure::kMig;
      break;
    }
  }
  if (nu.free_cpu < s.milli_cpu) return FitFailure::kCpu;
  if (nu.free_memory < s.memory_mib) return FitFailure::kMemory;
  return FitFailure::kFits;
}

FitFailure CheckNodeStatic(const Topology& t, uint32_t n, const GroupRequest& g) {
  const NodeInfo& node = t.nodes()[n];
  const TaskShape& s = g.shape;
  if (s.NeedsGpu()) {
    if (!ModelAllowed(node, s)) return FitFailure::kModel;
    if (s.kind == job::GpuKind::kMig &&
        (!t.gpus()[node.first_gpu].mig ||
         MigShapeFor(t, node.first_gpu, s) == cluster::kNoMigShape)) {
      return FitFailure::kMig;
    }
    if (s.kind != job::GpuKind::kMig && t.gpus()[node.first_gpu].mig) return FitFailure::kModel;
  }
  if (!g.selector.empty() && !SelectorMatches(node, g)) return FitFailure::kSelector;
  if (s.NeedsGpu()) {
    if (node.gpu_memory_mib < s.min_gpu_memory_mib ||
        (s.kind != job::GpuKind::kMig && node.gpu_memory_mib < s.gpu_memory_mib)) {
      return FitFailure::kGpuMemorySize;
    }
    if (node.num_gpus < s.gpus) return FitFailure::kWholeGpus;
  }
  if (node.milli_cpu < s.milli_cpu) return FitFailure::kCpu;
  if (node.memory_mib < s.memory_mib) return FitFailure::kMemory;
  // Last, so that "never" names the hardware when no node has it, and the rule only when the
  // nodes that have it are all excluded.
  if (Excluded(n, g)) return FitFailure::kNodeRule;
  return FitFailure::kFits;
}

int64_t StaticReplicaCapacity(const Topology& t, uint32_t n, const GroupRequest& g) {
  if (CheckNodeStatic(t, n, g) != FitFailure::kFits) return 0;
  const NodeInfo& node = t.nodes()[n];
  const TaskShape& s = g.shape;
  int64_t cap = INT64_MAX;
  switch (s.kind) {
    case job::GpuKind::kNone:
      break;
    case job::GpuKind::kWhole:
      cap = node.num_gpus / s.gpus;
      break;
    case job::GpuKind::kShared: {
      int64_t per_gpu = cluster::kMilliPerGpu / s.milli;
      if (s.gpu_memory_mib > 0)
        per_gpu = std::min<int64_t>(per_gpu, node.gpu_memory_mib / s.gpu_memory_mib);
      cap = per_gpu * node.num_gpus;
      break;
    }
    case job::GpuKind::kMig: {
      const auto shape = static_cast<cluster::MigShape>(MigShapeFor(t, node.first_gpu, s));
      cap = int64_t{cluster::MigMaxInstances(shape)} * node.num_gpus;
      break;
    }
  }
  if (s.milli_cpu > 0) cap = std::min(cap, node.milli_cpu / s.milli_cpu);
  if (s.memory_mib > 0) cap = std::min(cap, node.memory_mib / s.memory_mib);
  if (g.max_per_node > 0) cap = std::min<int64_t>(cap, g.max_per_node);
  return cap == INT64_MAX ? 1'000'000 : cap;
}

void ChooseGpus(const ClusterUsage& u, uint32_t n, const TaskShape& s, uint32_t preferred,
                std::vector<cluster::GpuGrant>* out) {
  const Topology& t = u.topology();
  const NodeInfo& node = t.nodes()[n];
  const uint32_t begin = node.first_gpu, end = node.first_gpu + node.num_gpus;
  if (s.kind == job::GpuKind::kShared || s.kind == job::GpuKind::kMig) {
    uint32_t g = (preferred >= begin && preferred < end && GpuFitsShared(u, preferred, s))
                     ? preferred
                     : BestFitSharedGpu(u, n, s);
    cluster::GpuGrant grant{g, s.milli, s.gpu_memory_mib};
    if (s.kind == job::GpuKind::kMig) {
      grant.mig_shape = MigShapeFor(t, g, s);
      grant.mig_start =
          static_cast<int8_t>(u.MigStartFor(g, static_cast<cluster::MigShape>(grant.mig_shape)));
    }
    out->push_back(grant);
    return;
  }
  if (s.kind != job::GpuKind::kWhole) return;
  auto is_free = [&](uint32_t g) {
    return u.gpu_available(g) && u.gpu_free_milli(g) == cluster::kMilliPerGpu &&
           u.gpu_free_memory(g) == t.gpus()[g].memory_mib;
  };
  // Best-fit NVLink domain within the node: the one with the fewest free GPUs that holds them all.
  uint32_t best_begin = UINT32_MAX;
  int best_free = INT32_MAX;
  for (uint32_t g = begin; g < end;) {
    const uint32_t d = t.gpus()[g].nvlink_domain, dom_begin = g;
    int free = 0;
    for (; g < end && t.gpus()[g].nvlink_domain == d; ++g) free += is_free(g);
    if (free >= s.gpus && free < best_free) {
      best_free = free;
      best_begin = dom_begin;
    }
  }
  int need = s.gpus;
  if (best_begin != UINT32_MAX) {
    const uint32_t d = t.gpus()[best_begin].nvlink_domain;
    for (uint32_t g = best_begin; g < end && need > 0 && t.gpus()[g].nvlink_domain == d; ++g) {
      if (is_free(g)) out->push_back({g, s.milli, t.gpus()[g].memory_mib}), --need;
    }
  }
  for (uint32_t g = begin; g < end && need > 0; ++g) {  // spans domains: lowest indices
    if (is_free(g)) out->push_back({g, s.milli, t.gpus()[g].memory_mib}), --need;
  }
}

}  // namespace hangar::sched::placement
