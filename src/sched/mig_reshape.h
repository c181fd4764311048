// Queue-driven MIG reshaping: when pending MIG replicas find no free instance of their
// shape, re-cut GPUs whose instances are idle -- one GPU at a time, never touching an instance a
// task runs in -- so the queue's shapes exist. The plan is part of a cycle's Decisions; the owner
// carries it out (the controller sends MigReshape to the node's agent, the simulator waits the
// reshape time) and sets the GPU's new layout when it is done.
//
// Only GPUs whose layout is known and not fixed by cluster.yaml are re-cut. A GPU with a reshape
// in flight is left alone; the free instances its reshape will make count as supply already, so
// one waiting job does not start a reshape every cycle.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "cluster/mig_geometry.h"
#include "cluster/usage.h"
#include "sched/snapshot.h"

namespace hangar::sched {

struct MigReshapeLimits {
  int max_jobs = 256;      // pending jobs looked at per cycle
  int max_instances = 64;  // instances planned per cycle
};

// Plans reshapes for `pending` jobs (indices into snap.pending, in the cycle's order) that the
// cycle did not place. `u` is the cycle's usage after its placements. Appends to `out`.
void PlanMigReshapes(const cluster::ClusterUsage& u, const Snapshot& snap,
                     std::span<const uint32_t> pending, const MigReshapeLimits& limits,
                     std::vector<MigReshapePlan>* out);

// The instances of `before` that `after` lacks (to destroy) and those it adds (to create), by
// start slice.
uint8_t MigStartsToDestroy(const cluster::MigLayout& before, const cluster::MigLayout& after);
uint8_t MigStartsToCreate(const cluster::MigLayout& before, const cluster::MigLayout& after);

}  // namespace hangar::sched
