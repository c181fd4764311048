// Proportionality: CPU and host memory per GPU, per GPU model, from cluster.yaml's
// `gpu_models:` (cluster::GpuModelLimits; docs/cluster-format.md). Applied to a job at
// submission, so a GPU job neither strands GPUs by taking a node's CPU nor starves for want of it.
#pragma once

#include <vector>

#include "cluster/cluster_yaml.h"
#include "cluster/topology.h"
#include "common/status.h"
#include "job/job_spec.h"

namespace hangar::job {

// For every GPU task group of `spec`, over the models it may run on (its gpu_models, or every
// model of the topology) that `limits` lists:
//  - CPU: when the group asks for neither `cpu` nor `cpu_per_gpu`, it gets the smallest
//    default_cpu_per_gpu of those models (so it still fits on all of them): `cpu_per_gpu` for
//    whole GPUs, `cpu` = default x its share for a GPU share or a MIG instance. Memory likewise,
//    on its own (`memory` / `memory_per_gpu`).
//  - Otherwise the CPU (memory) per GPU it asks for, (cpu + cpu_per_gpu x GPUs) / GPUs with a
//    share counted as its fraction of a GPU, must not exceed the maximum of any of those models:
//    InvalidArgument naming the model, its maximum, what the group asked for and what to do.
// Models `limits` does not list, and CPU-only groups, are left as they are.
Status ApplyGpuModelLimits(const std::vector<cluster::GpuModelLimits>& limits,
                           const cluster::Topology& topology, JobSpec* spec);

}  // namespace hangar::job
