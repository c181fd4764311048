#include "sched/reason.h"

#include "common/units.h"

namespace hangar::sched {

namespace {
std::string N(int64_t v) { return std::to_string(v); }
std::string Gpus(int64_t milli) { return milli % 1000 == 0 ? N(milli / 1000) : FormatMilli(milli); }
std::string Plural(int64_t n, const char* word) { return N(n) + " " + word + (n == 1 ? "" : "s"); }
std::string NodeName(const cluster::Topology& t, uint64_t n) {
  return n < t.nodes().size() ? t.nodes()[n].name : "node #" + N(static_cast<int64_t>(n));
}
}  // namespace

std::string_view Reason::RuleName() const {
  switch (rule) {
    case Rule::kNone:
      return "none";
    case Rule::kNeverGpusPerReplica:
      return "never-gpus-per-replica";
    case Rule::kNeverModel:
      return "never-gpu-model";
    case Rule::kNeverSelector:
      return "never-node-selector";
    case Rule::kNeverGpuMemory:
      return "never-gpu-memory";
    case Rule::kNeverCpu:
      return "never-cpu";
    case Rule::kNeverMemory:
      return "never-memory";
    case Rule::kNeverMig:
      return "never-mig";
    case Rule::kNeverDomain:
      return "never-topology-domain";
    case Rule::kNeverExcludedNodes:
      return "never-exclude-nodes";
    case Rule::kNeverIncludedNode:
      return "never-include-nodes";
    case Rule::kNeverPerNode:
      return "never-nodes-for-max-per-node";
    case Rule::kNeverCluster:
      return "never-cluster-size";
    case Rule::kNotNowDomain:
      return "topology-domain";
    case Rule::kNotNowNodeGpus:
      return "node-gpus";
    case Rule::kNotNowCluster:
      return "cluster-gpus";
    case Rule::kNotNowShared:
      return "shared-gpu";
    case Rule::kNotNowCpu:
      return "cpu";
    case Rule::kNotNowMemory:
      return "memory";
    case Rule::kNotNowUnhealthy:
      return "node-health";
    case Rule::kNotNowReserved:
      return "backfill-reservation";
    case Rule::kNotNowBlocked:
      return "strict-order";
    case Rule::kNotNowQuota:
      return "quota";
    case Rule::kNotNowReplicas:
      return "gang-replicas";
    case Rule::kNotNowNotExamined:
      return "not-examined";
    case Rule::kNotNowExcludedNodes:
      return "exclude-nodes";
    case Rule::kNotNowIncludedNode:
      return "include-nodes";
    case Rule::kNotNowWindow:
      return "reservation-window";
    case Rule::kNotNowWindowClosed:
      return "reservation-not-open";
    case Rule::kNotNowInsideWindow:
      return "reservation-full";
    case Rule::kNotNowAgentFeature:
      return "agent-version";
  }
  return "unknown";
}

std::string Reason::ToString(const cluster::Topology& topo) const {
  const std::string lvl(cluster::LevelName(level));
  switch (rule) {
    case Rule::kNone:
      return "";
    case Rule::kNeverGpusPerReplica:
      return "never: asks " + N(need) + " GPUs per replica, largest node has " + N(have);
    case Rule::kNeverModel: {
      std::string here;
      for (const auto& m : topo.models()) here += (here.empty() ? "" : ", ") + m;
      return "never: no node has an allowed GPU model; this cluster has: " +
             (here.empty() ? std::string("no GPUs") : here);
    }
    case Rule::kNeverSelector:
      return "never: no node with the requested GPUs matches its node_selector";
    case Rule::kNeverGpuMemory:
      return "never: asks GPUs with at least " + FormatMemoryMiB(need) + ", the largest has " +
             FormatMemoryMiB(have);
    case Rule::kNeverCpu:
      return "never: asks " + FormatMilli(need) + " CPUs per replica, largest node has " +
             FormatMilli(have);
    case Rule::kNeverMemory:
      return "never: asks " + FormatMemoryMiB(need) + " memory per replica, largest node has " +
             FormatMemoryMiB(have);
    case Rule::kNeverMig:
      return "never: no node has MIG-mode GPUs of model " + topo.MaskToString(models) +
             " that offer this profile (its name follows the GPU's memory, e.g. 3g.40gb on 80 GB, "
             "3g.71gb on H200: docs/mig.md)";
    case Rule::kNeverDomain:
      return "never: needs " + Gpus(need) + " GPUs under one " + lvl + "; the largest " + lvl +
             " has " + Gpus(have);
    case Rule::kNeverExcludedNodes:
      return "never: every node with the GPUs, CPU, memory and labels it asks is in its "
             "exclude_nodes";
    case Rule::kNeverIncludedNode:
      if (other >= topo.nodes().size())
        return "never: its include_nodes names a node this cluster does not have";
      return "never: its include_nodes names " + NodeName(topo, other) +
             ", which cannot hold a replica of it even when empty (its GPUs, CPU, memory or labels "
             "fall short)";
    case Rule::kNeverPerNode:
      return "never: needs " + N(need) + " replicas at most " + N(static_cast<int64_t>(other)) +
             " per node (max_per_node; sbatch's --nodes), but only " + Plural(have, "node") +
             " in this cluster could hold one; ask for fewer nodes";
    case Rule::kNeverCluster:
      return "never: needs " + Gpus(need) + " GPUs; only " + Gpus(have) +
             " in this cluster could serve it";
    case Rule::kNotNowDomain:
      return "needs " + Gpus(need) + " GPUs under one " + lvl + "; the emptiest " + lvl + " has " +
             Gpus(have) + " free";
    case Rule::kNotNowNodeGpus:
      return "needs " + Plural(need, "free GPU") + " on one node; the emptiest node has " + N(have);
    case Rule::kNotNowCluster:
      return "needs " + Gpus(need) + " GPUs; " + Gpus(have) + " free that could serve it";
    case Rule::kNotNowShared:
      return "needs " + FormatMilli(need) + " of one GPU; the most free on one GPU is " +
             FormatMilli(have);
    case Rule::kNotNowCpu:
      return "the GPUs are free but no such node has " + FormatMilli(need) +
             " CPUs free (most: " + FormatMilli(have) + ")";
    case Rule::kNotNowMemory:
      return "the GPUs are free but no such node has " + FormatMemoryMiB(need) +
             " memory free (most: " + FormatMemoryMiB(have) + ")";
    case Rule::kNotNowUnhealthy:
      return "fits only on nodes that are draining, degraded or cordoned";
    case Rule::kNotNowReserved:
      return "fits only on nodes reserved for job " + N(static_cast<int64_t>(other)) +
             (at == kNever
                  ? std::string(", and would hold them past its start")
                  : ", which starts by " + FormatUtcTimestamp(at) + "; it would delay that job");
    case Rule::kNotNowBlocked:
      return "strict order: waits behind job " + N(static_cast<int64_t>(other));
    case Rule::kNotNowQuota:
      return "over its queue's quota: needs " + Gpus(need) + " GPUs, " + Gpus(have) + " left";
    case Rule::kNotNowReplicas:
      return "needs room for " + N(need) + " replicas of " +
             Plural(static_cast<int64_t>(other), "GPU") + " at once; only " + N(have) + " fit now";
    case Rule::kNotNowNotExamined:
      return "not examined this cycle: no free capacity was left for it";
    case Rule::kNotNowExcludedNodes:
      return "its exclude_nodes keeps it off " + Plural(static_cast<int64_t>(other), "node") +
             (other == 1 ? " that has" : " that have") + " room for it now; the other nodes fit " +
             N(have) + " of its " + N(need) + " replicas";
    case Rule::kNotNowIncludedNode:
      return "its include_nodes names " + NodeName(topo, other) +
             ", which has no room for a replica of it now (" + N(have) + " GPUs free)";
    case Rule::kNotNowWindow:
      return "fits only on nodes held by a reservation window from " + FormatUtcTimestamp(at) +
             ", or its time limit would cross that start (a job without one runs for ever)";
    case Rule::kNotNowWindowClosed:
      return "runs inside a reservation window that opens at " + FormatUtcTimestamp(at);
    case Rule::kNotNowInsideWindow:
      return "runs inside a reservation window whose nodes have not the room for it now";
    case Rule::kNotNowAgentFeature:
      return "needs a terminal or an open stdin, which the agents of " +
             Plural(static_cast<int64_t>(other), "node") +
             " with room for it cannot give (they run an older hangar: upgrade them, "
             "docs/operations.md); the other nodes fit " +
             N(have) + " of its " + N(need) + " replicas";
  }
  return "";
}

}  // namespace hangar::sched
