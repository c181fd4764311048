// GangRequest: a JobSpec compiled against one cluster's Topology into integer shapes the placer
// can test in a few instructions (model names become a bit mask, per-GPU CPU and memory become
// per-replica totals). Built once when a job is admitted, not once per cycle.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "cluster/mig_geometry.h"
#include "cluster/topology.h"
#include "common/status.h"
#include "job/job_spec.h"
#include "sched/node_rule.h"

namespace hangar::sched {

// One replica's needs.
struct TaskShape {
  job::GpuKind kind = job::GpuKind::kNone;
  int32_t gpus = 0;                // whole GPUs (1 for shared and MIG)
  int32_t milli = 0;               // per GPU: 1000 whole, < 1000 shared, MIG slices for kMig
  int64_t gpu_memory_mib = 0;      // shared/MIG: GPU memory taken
  int64_t min_gpu_memory_mib = 0;  // only GPUs at least this big
  int64_t milli_cpu = 0;           // per replica
  int64_t memory_mib = 0;          // per replica
  cluster::ModelMask models = cluster::kAnyModel;
  // kMig: the MigShape the profile names on each MIG part (kNoMigShape: that part has no such
  // profile), so a fit reads the shape of a GPU's part without parsing names.
  std::array<uint8_t, cluster::kMigParts> mig_shape = NoMigShapes();

  static constexpr std::array<uint8_t, cluster::kMigParts> NoMigShapes() {
    std::array<uint8_t, cluster::kMigParts> a{};
    a.fill(cluster::kNoMigShape);
    return a;
  }
  // Sets kind, milli, gpu_memory_mib and mig_shape for one instance of MIG `profile`.
  void SetMigProfile(std::string_view profile, int compute_slices, int64_t memory_mib);
  // kMig: the profile's name on the first part that has it ("" when none does).
  std::string MigProfileName() const;

  bool NeedsGpu() const { return kind != job::GpuKind::kNone; }
  // milli-GPU one replica takes (MIG slices scaled to 1000/7 each).
  int64_t MilliGpu() const;
};

struct GroupRequest {
  TaskShape shape;
  int32_t replicas = 1;
  cluster::Labels selector;  // sorted
  // The job's exclude_nodes (NodeRule::excluded), kept with each group so that every node filter
  // (CheckNode, CheckNodeStatic) applies it.
  std::vector<uint32_t> excluded_nodes;
  // At most this many of the group's replicas on one node (0: no limit; the job file's
  // max_per_node, which sbatch sets to 1 for --nodes).
  int32_t max_per_node = 0;
  // AgentFeature bits (common/version.h) the node's agent must have: a terminal or an open stdin.
  uint8_t agent_needs = 0;

  // Whether `placed` replicas of this group on one node leave room for another.
  bool NodeTakesAnother(int32_t placed) const { return max_per_node == 0 || placed < max_per_node; }
};

struct GangRequest {
  std::vector<GroupRequest> groups;
  job::TopologyConstraint topology;
  NodeRule nodes;  // include_nodes / exclude_nodes (node_rule.h)
  int64_t total_milli_gpu = 0;
  int64_t total_whole_gpus = 0;
  int32_t total_replicas = 0;
  // Equal for requests that are equal in everything the placer reads; lets a cycle remember
  // that a shape did not fit without trying it again.
  uint64_t fingerprint = 0;

  bool IsSingleTask() const { return total_replicas == 1; }
};

// Compiles `spec` for `topology`. Fails only on what no cluster could change (a model name this
// cluster has never heard of is not an error: the request simply matches no node, and the
// scheduler reports it as never).
StatusOr<GangRequest> CompileGang(const job::JobSpec& spec, const cluster::Topology& topology);

// Builds a single-task request directly (simulators and benchmarks).
GangRequest MakeSingleTaskRequest(const TaskShape& shape, int32_t replicas = 1,
                                  job::TopologyConstraint topology = {});
void Fingerprint(GangRequest* request);
// Whether two requests are equal in everything the placer reads, field by field: what a cache
// keyed by the fingerprint must check on a hit (two requests may share a fingerprint).
bool SamePlacement(const GangRequest& a, const GangRequest& b);

}  // namespace hangar::sched
