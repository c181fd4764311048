// ClusterUsage: what is free right now, per GPU, per node and per fabric domain. A value type:
// the state owner keeps one and applies allocations and releases; the scheduler copies it at the
// start of a cycle and plans on the copy, never on live state.
//
// Aggregates (free whole GPUs, free milli-GPU, a histogram of nodes by free whole GPUs, maxima)
// are kept for every leaf, spine and the cluster, counting only schedulable nodes and available
// GPUs, so a search can skip a whole subtree that cannot host a request.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "cluster/mig_geometry.h"
#include "cluster/topology.h"
#include "common/status.h"

namespace hangar::cluster {

// A share of one GPU granted to a task. For a GPU in MIG mode `milli` counts compute slices
// (1-7), and the grant is one GPU instance of `mig_shape` (a MigShape) at memory slice
// `mig_start`; its memory is the instance's, so `memory_mib` is what the profile names.
struct GpuGrant {
  uint32_t gpu = 0;  // global GPU index in the Topology
  int32_t milli = 0;
  int64_t memory_mib = 0;
  int8_t mig_start = -1;  // MIG only: the first memory slice (0-7)
  uint8_t mig_shape = 0;  // MIG only: a MigShape
};

// One task (a replica of a task group) on one node.
struct TaskPlacement {
  uint32_t node = 0;
  uint16_t group = 0;    // task group index within the job
  uint32_t replica = 0;  // replica index within the group
  int64_t milli_cpu = 0;
  int64_t memory_mib = 0;
  uint32_t first_grant = 0;  // grants [first_grant, end_grant) in GangAssignment::grants
  uint32_t end_grant = 0;
};

// Everything one gang holds. Tasks are in (group, replica) order.
struct GangAssignment {
  std::vector<TaskPlacement> tasks;
  std::vector<GpuGrant> grants;

  std::span<const GpuGrant> GrantsOf(const TaskPlacement& t) const {
    return {grants.data() + t.first_grant, grants.data() + t.end_grant};
  }
  int64_t TotalMilliGpu(const Topology& topo) const;  // MIG slices count as 1000/7 each
  bool Empty() const { return tasks.empty(); }
};

// Task k of `a` alone, as a one-task assignment (to release one task of a gang).
GangAssignment TaskShare(const GangAssignment& a, size_t k);

class ClusterUsage;
// Holds for a job what of `a` is free in `usage` now, so that nobody else takes it while the
// job waits for the rest (a preemptor waiting for its victims to stop): each task whole where it
// fits, else each of its GPU grants that fits on its own. Returns what it allocated (to Release).
std::vector<GangAssignment> HoldWhatIsFree(ClusterUsage& usage, const GangAssignment& a);

// What the health system allows on a node.
struct NodeCondition {
  bool schedulable = true;    // false: draining, quarantined, failed, lost or cordoned
  bool gangs_allowed = true;  // false: degraded -- no new multi-task gangs
  int8_t penalty = 0;         // > 0: suspect, ranked after clean nodes
  int8_t band = 0;            // performance band from validation (0 = best)
  // AgentFeature bits (common/version.h) its agent lacks: a job that needs one is not placed
  // here (0 for simulated nodes and agents of this version).
  uint8_t agent_lacks = 0;
  bool operator==(const NodeCondition&) const = default;
};

// Kinds of GPU task, for policies that group like with like: 0 = a shared GPU, 1..6 = that many
// whole GPUs (6 stands for 6 and more), 7 = a MIG slice.
inline constexpr int kTaskClasses = 8;
int TaskClassOf(int whole_gpus, bool shared, bool mig);

struct NodeUsage {
  int64_t free_cpu = 0;
  int64_t free_memory = 0;
  int32_t free_whole = 0;           // available, non-MIG GPUs with nothing on them
  int32_t free_milli = 0;           // sum of free milli over available non-MIG GPUs
  int32_t max_gpu_free_milli = 0;   // largest free share on one available non-MIG GPU
  int32_t max_mig_free_slices = 0;  // most free compute slices on one available MIG GPU
  uint8_t mig_shapes = 0;  // bit k: MigShape k has a free placement on an available MIG GPU
  NodeCondition condition;
  uint16_t task_classes[kTaskClasses] = {};  // GPU tasks on the node, by TaskClassOf
};

// Stranding: a free GPU on a schedulable node whose CPU or memory is (nearly) gone can take no
// task. Below one core or 1 GiB free, a node's free GPUs count as stranded.
inline constexpr int64_t kStrandingMilliCpu = 1000;
inline constexpr int64_t kStrandingMemoryMiB = 1024;
inline bool StrandsGpus(const NodeUsage& u) {
  return u.condition.schedulable &&
         (u.free_cpu < kStrandingMilliCpu || u.free_memory < kStrandingMemoryMiB);
}

struct DomainUsage {
  int64_t free_milli = 0;
  int32_t free_whole = 0;
  int32_t max_node_free_whole = 0;
  int32_t max_gpu_free_milli = 0;
  int32_t schedulable_nodes = 0;
};

class ClusterUsage {
 public:
  explicit ClusterUsage(std::shared_ptr<const Topology> topology);

  const Topology& topology() const { return *topology_; }
  const std::shared_ptr<const Topology>& topology_ptr() const { return topology_; }

  int32_t gpu_free_milli(uint32_t g) const { return gpu_free_milli_[g]; }
  int64_t gpu_free_memory(uint32_t g) const { return gpu_free_mem_[g]; }
  bool gpu_available(uint32_t g) const { return gpu_available_[g]; }
  // MIG mode: the memory slices GPU instances hold on GPU g (bit s: slice s); 0 otherwise.
  uint8_t gpu_mig_taken(uint32_t g) const { return gpu_mig_taken_[g]; }
  // Capacity of GPU g in its own units: 1000 milli, or 7 slices in MIG mode.
  int32_t gpu_capacity(uint32_t g) const;
  const NodeUsage& node(uint32_t n) const { return nodes_[n]; }
  // Changes whenever anything on node n changes; unique across every ClusterUsage in the process,
  // so (node, stamp) names one state of a node and scorers may cache by it.
  uint64_t node_stamp(uint32_t n) const { return node_stamps_[n]; }
  const DomainUsage& domain(Level level, uint32_t d) const;
  // Number of schedulable nodes in domain d with exactly k free whole GPUs.
  int32_t NodesWithFree(Level level, uint32_t d, int k) const;
  // How many replicas of `gpus` whole GPUs each fit in domain d, counting GPUs only.
  int64_t WholeGpuCapacity(Level level, uint32_t d, int gpus) const;

  // Takes everything in `a`. Fails (changing nothing) when a grant exceeds what is free, or a
  // MIG grant is not an allowed placement or overlaps an instance already there.
  Status Allocate(const GangAssignment& a);
  // Gives back everything in `a` (which must have been allocated).
  void Release(const GangAssignment& a);
  void SetNodeCondition(uint32_t n, NodeCondition c);
  void SetGpuAvailable(uint32_t g, bool available);

  // MIG layouts. A MIG GPU whose layout is not set places an instance wherever its
  // memory slices are free (as if instances were made on demand: the simulator's ideal). Once
  // set, it places a task only into a free instance its layout holds; a reshape changes that.
  // `fixed`: cluster.yaml sets the layout; reshaping leaves it alone.
  void SetMigLayout(uint32_t g, const MigLayout& layout, bool fixed = false);
  bool gpu_mig_fixed(uint32_t g) const { return gpu_mig_managed_[g] == 2; }
  void ClearMigLayout(uint32_t g);
  const MigLayout* gpu_mig_layout(uint32_t g) const {
    return gpu_mig_managed_[g] ? &gpu_mig_layout_[g] : nullptr;
  }
  // A reshape in flight on GPU g: it takes no new MIG task until the reshape ends.
  void SetMigReshaping(uint32_t g, bool reshaping);
  bool gpu_mig_reshaping(uint32_t g) const { return gpu_mig_reshaping_[g]; }
  // Bit k: GPU g can take one more instance of MigShape k now.
  uint8_t MigPlaceable(uint32_t g) const;
  // Where a new instance of `shape` goes on GPU g: the lowest free instance of that shape in its
  // layout, or on a GPU without one the start that keeps the most (MigBestStart); -1: none.
  int MigStartFor(uint32_t g, MigShape shape) const;

  int64_t TotalFreeWholeGpus() const { return cluster_.free_whole; }
  // Free whole GPUs on nodes that strand them (StrandsGpus); a scan of the nodes.
  int64_t StrandedGpus() const;
  int64_t AllocatedMilliGpu() const;  // over every GPU, available or not (MIG slices scaled)

 private:
  void RecomputeNode(uint32_t n);
  int32_t MigFree(uint32_t g, uint8_t* shapes) const;
  Status CheckGpuGrants(const GangAssignment& a) const;
  void ApplyNodeDelta(uint32_t n, const NodeUsage& before, const NodeUsage& after);
  void RecomputeMaxima(Level level, uint32_t d);
  int32_t* Hist(Level level, uint32_t d);

  std::shared_ptr<const Topology> topology_;
  int hist_width_ = 1;
  std::vector<int32_t> gpu_free_milli_;
  std::vector<int64_t> gpu_free_mem_;
  std::vector<uint8_t> gpu_available_;
  std::vector<uint8_t> gpu_mig_taken_;
  std::vector<MigLayout> gpu_mig_layout_;
  std::vector<uint8_t> gpu_mig_managed_;
  std::vector<uint8_t> gpu_mig_reshaping_;
  std::vector<NodeUsage> nodes_;
  std::vector<uint64_t> node_stamps_;
  std::vector<DomainUsage> leaves_, spines_;
  DomainUsage cluster_;
  std::vector<int32_t> leaf_hist_, spine_hist_, cluster_hist_;
};

}  // namespace hangar::cluster
