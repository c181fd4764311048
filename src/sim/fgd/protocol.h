// The FGD evaluation protocol (Weng et al., ATC'23) on an openb trace, run through Hangar's
// production scheduler: pods arrive one at a time in a seeded order inflated to `tune` x the
// cluster's GPU capacity, each is placed by one Scheduler::Cycle or skipped if nothing fits, and
// none ever leaves. The curves say how much of the cluster is allocated and how much of it is
// fragmented as the arrived request grows to 130 % of capacity.
//
// RunProtocol is thread-compatible: concurrent runs share only the read-only trace.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "cluster/topology.h"
#include "common/status.h"
#include "sched/placement/fragmentation.h"
#include "sched/request.h"
#include "sim/fgd/discrete_metrics.h"
#include "sim/fgd/openb_trace.h"

namespace hangar::sim::fgd {

struct OpenbTrace {
  std::string workload;          // the pod list's base name, e.g. "openb_pod_list_default"
  std::vector<OpenbNode> nodes;  // sorted by name
  std::vector<OpenbPod> pods;    // the original pods, sorted by name

  int64_t capacity_milli() const;  // all GPUs x 1000
};

// Reads both files and sorts them by name, as the simulator does.
StatusOr<OpenbTrace> LoadOpenbTrace(const std::string& nodes_csv, const std::string& pods_csv);

// Makes the mix CPU-heavier (or lighter): every pod's cpu_milli times `factor`, rounded to the
// nearest milli-core. Fails unless 0 < factor <= 100.
Status ScalePodCpu(double factor, OpenbTrace* trace);

struct RunOptions {
  std::string policy = "fgd";  // a placement policy name (sched::placement::ScorerNames)
  int64_t seed = 42;
  double tune = 1.3;
};

struct RunResult {
  int64_t seed = 0;
  int64_t pods = 0;    // arrivals after tuning
  int64_t failed = 0;  // pods that fit nowhere when they arrived
  Curve alloc;         // % of GPU capacity allocated, per column
  Curve frag;          // fragmented GPU as % of capacity, per column
  // At the first pod that brings the arrived GPU request to 100 % of capacity (nullopt when the
  // run never gets there), as % of the cluster's GPUs:
  //  - stranded: free whole GPUs on nodes with under one core or 1 GiB free
  //    (cluster::StrandsGpus, the rule of hangar_gpus{state="stranded"} and `hangar usage`);
  //  - starved: free GPU (shares included) on nodes whose free CPU is below the smallest CPU
  //    request of any GPU pod in the trace, so that no GPU pod of the trace could use it.
  std::optional<double> stranded_at_100;
  std::optional<double> starved_at_100;
};

// Fails on an unknown policy or a cluster the topology builder rejects.
StatusOr<RunResult> RunProtocol(const OpenbTrace& trace, const RunOptions& options);

// The cluster with nodes added in priority order (smallest p[i] first) in one leaf, so the
// placer's "ties go to the lowest node index" is FGD's "ties go to the smallest p[i]".
StatusOr<std::shared_ptr<const cluster::Topology>> BuildPriorityCluster(
    const std::vector<OpenbNode>& nodes, const std::vector<int32_t>& priority);

// FGD's typical pods: the original pods grouped by (cpu, per-GPU milli, GPU count, gpu_spec),
// the most frequent covering 95 % kept; model names resolved against `topology`.
sched::WorkloadProfile TypicalPods(const std::vector<OpenbPod>& pods,
                                   const cluster::Topology& topology);

// One pod as a single-task request (GPU memory is not part of the protocol: 0).
sched::GangRequest PodRequest(const OpenbPod& pod, const cluster::Topology& topology);

}  // namespace hangar::sim::fgd
