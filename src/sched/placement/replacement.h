// Replacing one node of a running gang: where the replacement comes from, and the gang's
// assignment with some of its tasks moved or left out. Pure: the controller (its spare pool) and
// `hangar sim goodput`'s loop both call it, so both replace a node the same way.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <utility>
#include <vector>

#include "cluster/topology.h"
#include "cluster/usage.h"
#include "job/job_spec.h"

namespace hangar::sched {

// The replacement for `failed`: the lowest-numbered node for which `usable` holds in the smallest
// domain around `failed` -- its leaf, then its spine, then the cluster -- that keeps the job's
// topology rule (a required rule at level L never looks beyond the failed node's domain at L).
// The failed node is a candidate like any other (repaired, it fits best). nullopt when no domain
// the rule allows has one.
std::optional<uint32_t> PickReplacement(const cluster::Topology& topo, uint32_t failed,
                                        const job::TopologyConstraint& rule,
                                        const std::function<bool(uint32_t)>& usable);

// Whether node `to` can take task `k` of `a` whole now: as many GPUs as the task has there, all
// free and available, and its CPU and memory. Schedulability is the caller's to check.
bool NodeTakesTask(const cluster::ClusterUsage& usage, uint32_t to,
                   const cluster::GangAssignment& a, size_t k);

// `a` with task k moved to node `to` (same GPU ordinals there) for each (k, to) in `moves`.
cluster::GangAssignment MoveTasks(const cluster::Topology& topo, const cluster::GangAssignment& a,
                                  const std::vector<std::pair<size_t, uint32_t>>& moves);
// `a` without the tasks whose indices `drop` holds (sorted or not).
cluster::GangAssignment WithoutTasks(const cluster::GangAssignment& a,
                                     const std::vector<size_t>& drop);

}  // namespace hangar::sched
