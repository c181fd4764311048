// Why a job is not placed: the rule that said no and the numbers behind it. Kept as a small
// struct (formatted only when someone asks) because a cycle may explain 100,000 jobs.
#pragma once

#include <cstdint>
#include <string>

#include "cluster/topology.h"
#include "common/time.h"

namespace hangar::sched {

enum class Rule : uint8_t {
  kNone,
  // Never: the request cannot fit this cluster even when it is empty.
  kNeverGpusPerReplica,  // need: GPUs per replica, have: largest node's GPU count
  kNeverModel,           // no node has an allowed GPU model
  kNeverSelector,        // no node matches the node selector
  kNeverGpuMemory,       // need: min GPU memory MiB, have: largest GPU memory
  kNeverCpu,             // need: milli-CPU per replica, have: largest node's CPU
  kNeverMemory,          // need: MiB per replica, have: largest node's memory
  kNeverMig,             // no node has MIG-mode GPUs of an allowed model
  kNeverDomain,          // need: GPUs under one `level`, have: the largest such domain's GPUs
  kNeverExcludedNodes,   // every node with the hardware it asks is in its exclude_nodes
  kNeverIncludedNode,    // `other`: a node of include_nodes that can never hold a replica of it
  kNeverPerNode,         // need: replicas of a group, have: nodes that could ever hold one,
                         // other: its max_per_node
  kNeverCluster,         // need: GPUs in all, have: GPUs that could ever serve it
  // Not now: it would fit an empty cluster, but not the cluster as it is.
  kNotNowDomain,       // need: GPUs under one `level`, have: most free in one such domain
  kNotNowNodeGpus,     // need: free GPUs on one node, have: most free on one node
  kNotNowCluster,      // need: GPUs in all, have: free GPUs that could serve it
  kNotNowShared,       // need: milli-GPU on one GPU, have: most free on one GPU
  kNotNowCpu,          // need: milli-CPU per replica, have: most free CPU on a node with the GPUs
  kNotNowMemory,       // need: MiB per replica, have: most free memory on a node with the GPUs
  kNotNowUnhealthy,    // fits only on nodes that are draining, degraded or cordoned
  kNotNowReserved,     // fits only on nodes held for `other` (which starts at `at`)
  kNotNowBlocked,      // strict order: waits behind `other`
  kNotNowQuota,        // need: milli-GPU, have: quota headroom in its queue
  kNotNowReplicas,     // need: replicas, have: how many fit now, other: GPUs per replica
  kNotNowNotExamined,  // the cycle stopped before this job (no capacity left)
  // Node rules (sched/node_rule.h).
  kNotNowExcludedNodes,  // need: replicas, have: how many fit now off the excluded nodes, other:
                         // excluded nodes that would take one
  kNotNowIncludedNode,   // `other`: a node of include_nodes with no room for a replica now; have:
                         // its free GPUs
  // Reservation windows (sched/windows.h); `other`: the window's index in the snapshot, `at`:
  // its start. The cycle names the window in its Verdict's detail.
  kNotNowWindow,        // fits only on nodes a window holds, or would hold them past its start
  kNotNowWindowClosed,  // runs inside a window that has not opened yet
  kNotNowInsideWindow,  // runs inside a window whose nodes have not the room for it now
  // Agents (common/version.h): need: replicas, have: how many fit now on nodes whose agents can
  // run it, other: nodes with room for one whose agents cannot (too old for a terminal task).
  kNotNowAgentFeature,
};

struct Reason {
  Rule rule = Rule::kNone;
  cluster::Level level = cluster::Level::kCluster;
  int64_t need = 0;
  int64_t have = 0;
  uint64_t other = 0;  // another job's id (reservation holder, job ahead)
  Time at = kNever;    // when a reservation starts
  cluster::ModelMask models = cluster::kAnyModel;

  bool IsNever() const { return rule >= Rule::kNeverGpusPerReplica && rule <= Rule::kNeverCluster; }
  // One line: "needs 16 GPUs under one leaf; the emptiest leaf has 12 free".
  std::string ToString(const cluster::Topology& topology) const;
  // The rule's short name, e.g. "topology-domain", for metrics and machine readers.
  std::string_view RuleName() const;
};

}  // namespace hangar::sched
