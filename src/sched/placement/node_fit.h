// Filters: can one replica go on this node now? Each failure names the filter, so the scheduler
// can say why. And GPU choice within a node once it fits.
#pragma once

#include <cstdint>
#include <vector>

#include "cluster/usage.h"
#include "sched/request.h"

namespace hangar::sched::placement {

enum class FitFailure : uint8_t {
  kFits,
  kUnschedulable,  // draining, quarantined, failed, lost, cordoned
  kNoGangs,        // degraded: takes no new multi-task gangs
  kExcluded,       // reserved for another job
  kModel,
  kSelector,
  kNodeRule,       // in the job's exclude_nodes
  kAgent,          // its agent lacks a feature the job needs (GroupRequest::agent_needs)
  kGpuMemorySize,  // its GPUs are smaller than min_gpu_memory
  kWholeGpus,
  kSharedGpu,
  kMig,
  kCpu,
  kMemory,
};

struct FitOptions {
  bool gang = false;                               // the job has more than one task
  bool single_nvlink = false;                      // all of a replica's GPUs in one NVLink domain
  const std::vector<uint8_t>* excluded = nullptr;  // per node: 1 = may not be used
};

// Checks the live state of node n for one replica of group g.
FitFailure CheckNode(const cluster::ClusterUsage& u, uint32_t n, const GroupRequest& g,
                     const FitOptions& opts);
// Checks whether node n could ever host one replica: empty, healthy, same hardware.
FitFailure CheckNodeStatic(const cluster::Topology& t, uint32_t n, const GroupRequest& g);
// How many replicas of g an empty node n could hold.
int64_t StaticReplicaCapacity(const cluster::Topology& t, uint32_t n, const GroupRequest& g);

// Appends the grants for one replica of `s` on node n, which must fit. Whole GPUs: the best-fit
// NVLink domain inside the node that holds them all, lowest indices first. Shared and MIG: GPU
// `preferred` when it fits, else the GPU with the least free share that fits (lowest index);
// for MIG, the GPU whose cut costs the node the least of what it could still place, and on it
// the start slice that keeps the largest shapes possible (cluster::MigBestStart).
void ChooseGpus(const cluster::ClusterUsage& u, uint32_t n, const TaskShape& s, uint32_t preferred,
                std::vector<cluster::GpuGrant>* out);

// For shared shapes: the GPU with the least free milli that still fits (best fit); for MIG,
// as ChooseGpus picks; UINT32_MAX when none fits.
uint32_t BestFitSharedGpu(const cluster::ClusterUsage& u, uint32_t n, const TaskShape& s);
// True when GPU g (of the replica's node) can take one replica of shared/MIG shape s.
bool GpuFitsShared(const cluster::ClusterUsage& u, uint32_t g, const TaskShape& s);
// kMig: the MigShape that s's profile names on GPU g's part (cluster::kNoMigShape when none).
uint8_t MigShapeFor(const cluster::Topology& t, uint32_t g, const TaskShape& s);

}  // namespace hangar::sched::placement
