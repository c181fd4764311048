#include "cluster/usage.h"

#include <algorithm>
#include <atomic>

#include "cluster/mig_geometry.h"

namespace hangar::cluster {

namespace {
std::atomic<uint64_t> g_next_stamp{1};
uint64_t NextStamp() { return g_next_stamp.fetch_add(1, std::memory_order_relaxed); }
}  // namespace

int TaskClassOf(int whole_gpus, bool shared, bool mig) {
  if (mig) return 7;
  if (shared) return 0;
  return std::clamp(whole_gpus, 1, 6);
}

namespace {
// The class of task t of `a`, or -1 for a CPU-only task.
int ClassOfTask(const Topology& topo, const GangAssignment& a, const TaskPlacement& t) {
  if (t.first_grant == t.end_grant) return -1;
  const GpuGrant& first = a.grants[t.first_grant];
  const bool mig = topo.gpus()[first.gpu].mig;
  const bool shared = !mig && first.milli < kMilliPerGpu;
  return TaskClassOf(static_cast<int>(t.end_grant - t.first_grant), shared, mig);
}
}  // namespace

int64_t GangAssignment::TotalMilliGpu(const Topology& topo) const {
  int64_t total = 0;
  for (const auto& g : grants) {
    total += topo.gpus()[g.gpu].mig ? g.milli * kMilliPerGpu / kMigSlicesPerGpu : g.milli;
  }
  return total;
}

GangAssignment TaskShare(const GangAssignment& a, size_t k) {
  GangAssignment one;
  const TaskPlacement& t = a.tasks[k];
  one.grants.assign(a.grants.begin() + t.first_grant, a.grants.begin() + t.end_grant);
  one.tasks.push_back(t);
  one.tasks[0].first_grant = 0;
  one.tasks[0].end_grant = static_cast<uint32_t>(one.grants.size());
  return one;
}

std::vector<GangAssignment> HoldWhatIsFree(ClusterUsage& usage, const GangAssignment& a) {
  std::vector<GangAssignment> held;
  for (size_t k = 0; k < a.tasks.size(); ++k) {
    GangAssignment share = TaskShare(a, k);
    if (usage.Allocate(share).ok()) {
      held.push_back(std::move(share));
      continue;
    }
    // Part of its node is still in use (by a victim that has not stopped): hold the GPUs that
    // are free, without CPU or memory, or the next job placed there takes them and the
    // preemptor must preempt again.
    for (const GpuGrant& g : share.grants) {
      GangAssignment one;
      one.grants.push_back(g);
      TaskPlacement t = share.tasks[0];
      t.milli_cpu = 0;
      t.memory_mib = 0;
      t.first_grant = 0;
      t.end_grant = 1;
      one.tasks.push_back(t);
      if (usage.Allocate(one).ok()) held.push_back(std::move(one));
    }
  }
  return held;
}

ClusterUsage::ClusterUsage(std::shared_ptr<const Topology> topology)
    : topology_(std::move(topology)) {
  const Topology& t = *topology_;
  hist_width_ = t.max_gpus_per_node() + 1;
  const size_t ng = t.gpus().size();
  gpu_free_milli_.resize(ng);
  gpu_free_mem_.resize(ng);
  gpu_available_.assign(ng, 1);
  gpu_mig_taken_.assign(ng, 0);
  gpu_mig_layout_.resize(ng);
  gpu_mig_managed_.assign(ng, 0);
  gpu_mig_reshaping_.assign(ng, 0);
  for (size_t g = 0; g < ng; ++g) {
    gpu_free_milli_[g] = gpu_capacity(static_cast<uint32_t>(g));
    gpu_free_mem_[g] = t.gpus()[g].memory_mib;
  }
  nodes_.resize(t.nodes().size());
  node_stamps_.resize(t.nodes().size());
  leaves_.resize(t.leaves().size());
  spines_.resize(t.spines().size());
  leaf_hist_.assign(t.leaves().size() * hist_width_, 0);
  spine_hist_.assign(t.spines().size() * hist_width_, 0);
  cluster_hist_.assign(hist_width_, 0);
  for (uint32_t n = 0; n < nodes_.size(); ++n) {
    nodes_[n].free_cpu = t.nodes()[n].milli_cpu;
    nodes_[n].free_memory = t.nodes()[n].memory_mib;
    NodeUsage empty;
    empty.condition.schedulable = false;  // contributes nothing yet
    RecomputeNode(n);
    NodeUsage after = nodes_[n];
    ApplyNodeDelta(n, empty, after);
  }
}

int32_t ClusterUsage::gpu_capacity(uint32_t g) const {
  return topology_->gpus()[g].mig ? kMigSlicesPerGpu : static_cast<int32_t>(kMilliPerGpu);
}

const DomainUsage& ClusterUsage::domain(Level level, uint32_t d) const {
  switch (level) {
    case Level::kLeaf:
      return leaves_[d];
    case Level::kSpine:
      return spines_[d];
    default:
      return cluster_;
  }
}

int32_t* ClusterUsage::Hist(Level level, uint32_t d) {
  switch (level) {
    case Level::kLeaf:
      return &leaf_hist_[d * hist_width_];
    case Level::kSpine:
      return &spine_hist_[d * hist_width_];
    default:
      return cluster_hist_.data();
  }
}

int32_t ClusterUsage::NodesWithFree(Level level, uint32_t d, int k) const {
  if (k < 0 || k >= hist_width_) return 0;
  if (level == Level::kNode) {
    return nodes_[d].condition.schedulable && nodes_[d].free_whole == k ? 1 : 0;
  }
  return const_cast<ClusterUsage*>(this)->Hist(level, d)[k];
}

int64_t ClusterUsage::WholeGpuCapacity(Level level, uint32_t d, int gpus) const {
  if (gpus <= 0) return 0;
  if (level == Level::kNode) {
    return nodes_[d].condition.schedulable ? nodes_[d].free_whole / gpus : 0;
  }
  const int32_t* h = const_cast<ClusterUsage*>(this)->Hist(level, d);
  int64_t cap = 0;
  for (int k = gpus; k < hist_width_; ++k) cap += static_cast<int64_t>(h[k]) * (k / gpus);
  return cap;
}

void ClusterUsage::RecomputeNode(uint32_t n) {
  node_stamps_[n] = NextStamp();
  const NodeInfo& info = topology_->nodes()[n];
  NodeUsage& u = nodes_[n];
  u.free_whole = 0;
  u.free_milli = 0;
  u.max_gpu_free_milli = 0;
  u.max_mig_free_slices = 0;
  u.mig_shapes = 0;
  for (uint32_t g = info.first_gpu; g < info.first_gpu + info.num_gpus; ++g) {
    if (!gpu_available_[g]) continue;
    const int32_t free = gpu_free_milli_[g];
    if (topology_->gpus()[g].mig) {
      uint8_t shapes = 0;
      u.max_mig_free_slices = std::max(u.max_mig_free_slices, MigFree(g, &shapes));
      u.mig_shapes |= shapes;
      continue;
    }
    u.free_milli += free;
    u.max_gpu_free_milli = std::max(u.max_gpu_free_milli, free);
    if (free == kMilliPerGpu && gpu_free_mem_[g] == topology_->gpus()[g].memory_mib) u.free_whole++;
  }
}

void ClusterUsage::ApplyNodeDelta(uint32_t n, const NodeUsage& before, const NodeUsage& after) {
  const NodeInfo& info = topology_->nodes()[n];
  const bool was = before.condition.schedulable, is = after.condition.schedulable;
  const int64_t d_milli = (is ? after.free_milli : 0) - (was ? before.free_milli : 0);
  const int32_t d_whole = (is ? after.free_whole : 0) - (was ? before.free_whole : 0);
  const bool grew = (is ? after.free_whole : -1) >= (was ? before.free_whole : -1) &&
                    (is ? after.max_gpu_free_milli : -1) >= (was ? before.max_gpu_free_milli : -1);
  struct Target {
    Level level;
    uint32_t d;
    DomainUsage* u;
  };
  const Target targets[] = {{Level::kLeaf, info.leaf, &leaves_[info.leaf]},
                            {Level::kSpine, info.spine, &spines_[info.spine]},
                            {Level::kCluster, 0, &cluster_}};
  for (const Target& t : targets) {
    t.u->free_milli += d_milli;
    t.u->free_whole += d_whole;
    t.u->schedulable_nodes += static_cast<int>(is) - static_cast<int>(was);
    int32_t* h = Hist(t.level, t.d);
    if (was) h[before.free_whole]--;
    if (is) h[after.free_whole]++;
    if (grew) {
      if (is) {
        t.u->max_node_free_whole = std::max(t.u->max_node_free_whole, after.free_whole);
        t.u->max_gpu_free_milli = std::max(t.u->max_gpu_free_milli, after.max_gpu_free_milli);
      }
    } else {
      RecomputeMaxima(t.level, t.d);
    }
  }
}

void ClusterUsage::RecomputeMaxima(Level level, uint32_t d) {
  DomainUsage& u = level == Level::kLeaf    ? leaves_[d]
                   : level == Level::kSpine ? spines_[d]
                                            : cluster_;
  const int32_t* h = Hist(level, d);
  u.max_node_free_whole = 0;
  for (int k = hist_width_ - 1; k > 0; --k) {
    if (h[k] > 0) {
      u.max_node_free_whole = k;
      break;
    }
  }
  int32_t best = 0;
  if (level == Level::kLeaf) {
    const DomainInfo& leaf = topology_->leaves()[d];
    for (uint32_t n = leaf.first_node; n < leaf.end_node; ++n) {
      if (nodes_[n].condition.schedulable) best = std::max(best, nodes_[n].max_gpu_free_milli);
    }
  } else if (level == Level::kSpine) {
    const DomainInfo& spine = topology_->spines()[d];
    for (uint32_t l = spine.first_child; l < spine.end_child; ++l)
      best = std::max(best, leaves_[l].max_gpu_free_milli);
  } else {
    for (const auto& s : spines_) best = std::max(best, s.max_gpu_free_milli);
  }
  u.max_gpu_free_milli = best;
}

// Per GPU: whole and shared grants must fit the free milli and memory; MIG grants must be allowed
// placements that overlap neither each other nor the instances already on the GPU.
Status ClusterUsage::CheckGpuGrants(const GangAssignment& a) const {
  std::vector<GpuGrant> per_gpu(a.grants.begin(), a.grants.end());
  std::sort(per_gpu.begin(), per_gpu.end(),
            [](const GpuGrant& x, const GpuGrant& y) { return x.gpu < y.gpu; });
  for (size_t i = 0; i < per_gpu.size();) {
    const uint32_t g = per_gpu[i].gpu;
    if (g >= gpu_free_milli_.size())
      return Status::InvalidArgument("allocation names an unknown GPU");
    const GpuInfo& gi = topology_->gpus()[g];
    auto where = [&] {
      return "GPU " + std::to_string(gi.index) + " of node " + topology_->nodes()[gi.node].name;
    };
    int64_t milli = 0, mem = 0;
    uint8_t taken = gpu_mig_taken_[g];
    for (; i < per_gpu.size() && per_gpu[i].gpu == g; ++i) {
      const GpuGrant& grant = per_gpu[i];
      milli += grant.milli;
      if (!gi.mig) {
        mem += grant.memory_mib;
        continue;
      }
      const MigShape shape = static_cast<MigShape>(grant.mig_shape);
      if (grant.mig_shape >= kMigShapes || MigPlacementMask(shape, grant.mig_start) == 0 ||
          ShapeInfo(shape).compute_slices != grant.milli) {
        return Status::InvalidArgument(where() + ": not an allowed MIG placement (shape " +
                                       std::to_string(grant.mig_shape) + " at slice " +
                                       std::to_string(grant.mig_start) + ")");
      }
      if (gpu_mig_managed_[g] && !gpu_mig_layout_[g].Has(shape, grant.mig_start)) {
        return Status::FailedPrecondition(where() + " has no MIG instance of that shape at slice " +
                                          std::to_string(grant.mig_start) + " (its instances: " +
                                          MigLayoutText(gpu_mig_layout_[g], gi.mig_part) + ")");
      }
      if (!MigFitsAt(taken, shape, grant.mig_start)) {
        return Status::FailedPrecondition(where() + ": MIG slices from " +
                                          std::to_string(grant.mig_start) + " are already taken");
      }
      taken |= MigPlacementMask(shape, grant.mig_start);
    }
    if (gpu_free_milli_[g] < milli || gpu_free_mem_[g] < mem) {
      return Status::FailedPrecondition(where() + " is already taken");
    }
  }
  return Status::Ok();
}

Status ClusterUsage::Allocate(const GangAssignment& a) {
  // Validate first, with per-node and per-GPU totals, so that a failed allocation changes nothing.
  std::vector<TaskPlacement> per_node(a.tasks.begin(), a.tasks.end());
  std::sort(per_node.begin(), per_node.end(),
            [](const TaskPlacement& x, const TaskPlacement& y) { return x.node < y.node; });
  for (size_t i = 0; i < per_node.size();) {
    const uint32_t n = per_node[i].node;
    if (n >= nodes_.size()) return Status::InvalidArgument("allocation names an unknown node");
    int64_t cpu = 0, mem = 0;
    for (; i < per_node.size() && per_node[i].node == n; ++i) {
      cpu += per_node[i].milli_cpu;
      mem += per_node[i].memory_mib;
    }
    if (nodes_[n].free_cpu < cpu || nodes_[n].free_memory < mem) {
      return Status::FailedPrecondition("node " + topology_->nodes()[n].name +
                                        " lacks the CPU or memory for this allocation");
    }
  }
  HANGAR_RETURN_IF_ERROR(CheckGpuGrants(a));
  std::vector<uint32_t> touched;
  for (const auto& t : a.tasks) {
    nodes_[t.node].free_cpu -= t.milli_cpu;
    nodes_[t.node].free_memory -= t.memory_mib;
    const int cls = ClassOfTask(*topology_, a, t);
    if (cls >= 0) nodes_[t.node].task_classes[cls]++;
    touched.push_back(t.node);
  }
  for (const auto& g : a.grants) {
    gpu_free_milli_[g.gpu] -= g.milli;
    if (topology_->gpus()[g.gpu].mig) {
      gpu_mig_taken_[g.gpu] |= MigPlacementMask(static_cast<MigShape>(g.mig_shape), g.mig_start);
    } else {
      gpu_free_mem_[g.gpu] -= g.memory_mib;
    }
  }
  std::sort(touched.begin(), touched.end());
  touched.erase(std::unique(touched.begin(), touched.end()), touched.end());
  for (uint32_t n : touched) {
    NodeUsage before = nodes_[n];
    RecomputeNode(n);
    ApplyNodeDelta(n, before, nodes_[n]);
  }
  return Status::Ok();
}

void ClusterUsage::Release(const GangAssignment& a) {
  std::vector<uint32_t> touched;
  for (const auto& t : a.tasks) {
    nodes_[t.node].free_cpu += t.milli_cpu;
    nodes_[t.node].free_memory += t.memory_mib;
    const int cls = ClassOfTask(*topology_, a, t);
    if (cls >= 0) nodes_[t.node].task_classes[cls]--;
    touched.push_back(t.node);
  }
  for (const auto& g : a.grants) {
    gpu_free_milli_[g.gpu] += g.milli;
    if (topology_->gpus()[g.gpu].mig) {
      gpu_mig_taken_[g.gpu] &=
          static_cast<uint8_t>(~MigPlacementMask(static_cast<MigShape>(g.mig_shape), g.mig_start));
    } else {
      gpu_free_mem_[g.gpu] += g.memory_mib;
    }
  }
  std::sort(touched.begin(), touched.end());
  touched.erase(std::unique(touched.begin(), touched.end()), touched.end());
  for (uint32_t n : touched) {
    NodeUsage before = nodes_[n];
    RecomputeNode(n);
    ApplyNodeDelta(n, before, nodes_[n]);
  }
}

void ClusterUsage::SetNodeCondition(uint32_t n, NodeCondition c) {
  NodeUsage before = nodes_[n];
  nodes_[n].condition = c;
  node_stamps_[n] = NextStamp();
  ApplyNodeDelta(n, before, nodes_[n]);
}

// GPU g's free compute slices in MIG mode (those its free instances hold, when its layout is
// known) and the shapes it can place one more of (bit k: MigShape k). One pass: RecomputeNode
// asks it for every GPU of a node on every allocation.
int32_t ClusterUsage::MigFree(uint32_t g, uint8_t* shapes) const {
  *shapes = 0;
  if (gpu_mig_reshaping_[g]) return 0;
  const uint8_t taken = gpu_mig_taken_[g];
  if (!gpu_mig_managed_[g]) {
    *shapes = MigPlaceableShapes(taken);
    return gpu_free_milli_[g];
  }
  static constexpr int8_t kCompute[kMigShapes] = {1, 1, 2, 3, 4, 7};
  int32_t free = 0;
  const MigLayout& l = gpu_mig_layout_[g];
  for (int s = 0; s < kMigMemorySlices; ++s) {
    const uint8_t sh = l.shape_at[s];
    if (sh != kNoMigShape && !(kMigPlacementMasks[sh][s] & taken)) {
      *shapes |= static_cast<uint8_t>(1u << sh);
      free += kCompute[sh];
    }
  }
  return free;
}

uint8_t ClusterUsage::MigPlaceable(uint32_t g) const {
  uint8_t shapes = 0;
  MigFree(g, &shapes);
  return shapes;
}

int ClusterUsage::MigStartFor(uint32_t g, MigShape shape) const {
  if (gpu_mig_reshaping_[g]) return -1;
  if (!gpu_mig_managed_[g]) return MigBestStart(gpu_mig_taken_[g], shape);
  for (int s = 0; s < kMigMemorySlices; ++s) {
    if (gpu_mig_layout_[g].Has(shape, s) && MigFitsAt(gpu_mig_taken_[g], shape, s)) return s;
  }
  return -1;
}

void ClusterUsage::SetMigLayout(uint32_t g, const MigLayout& layout, bool fixed) {
  gpu_mig_layout_[g] = layout;
  gpu_mig_managed_[g] = fixed ? 2 : 1;
  const uint32_t n = topology_->gpus()[g].node;
  NodeUsage before = nodes_[n];
  RecomputeNode(n);
  ApplyNodeDelta(n, before, nodes_[n]);
}

void ClusterUsage::ClearMigLayout(uint32_t g) {
  gpu_mig_layout_[g] = MigLayout();
  gpu_mig_managed_[g] = 0;
  const uint32_t n = topology_->gpus()[g].node;
  NodeUsage before = nodes_[n];
  RecomputeNode(n);
  ApplyNodeDelta(n, before, nodes_[n]);
}

void ClusterUsage::SetMigReshaping(uint32_t g, bool reshaping) {
  if (static_cast<bool>(gpu_mig_reshaping_[g]) == reshaping) return;
  gpu_mig_reshaping_[g] = reshaping;
  const uint32_t n = topology_->gpus()[g].node;
  NodeUsage before = nodes_[n];
  RecomputeNode(n);
  ApplyNodeDelta(n, before, nodes_[n]);
}

void ClusterUsage::SetGpuAvailable(uint32_t g, bool available) {
  if (static_cast<bool>(gpu_available_[g]) == available) return;
  gpu_available_[g] = available;
  const uint32_t n = topology_->gpus()[g].node;
  NodeUsage before = nodes_[n];
  RecomputeNode(n);
  ApplyNodeDelta(n, before, nodes_[n]);
}

int64_t ClusterUsage::StrandedGpus() const {
  int64_t n = 0;
  for (const NodeUsage& u : nodes_) n += StrandsGpus(u) ? u.free_whole : 0;
  return n;
}

int64_t ClusterUsage::AllocatedMilliGpu() const {
  int64_t total = 0;
  for (uint32_t g = 0; g < gpu_free_milli_.size(); ++g) {
    const int32_t used = gpu_capacity(g) - gpu_free_milli_[g];
    total += topology_->gpus()[g].mig ? used * kMilliPerGpu / kMigSlicesPerGpu : used;
  }
  return total;
}

}  // namespace hangar::cluster
