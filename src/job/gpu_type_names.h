// Slurm GPU type names in a job's gpu_models (what `hangar sbatch` writes for `--gres=gpu:a100:1`
// when it does not know the site's models) become the cluster's models at submission, through
// cluster.yaml's gpu_types (cluster/gpu_types.h).
#pragma once

#include "cluster/gpu_types.h"
#include "cluster/topology.h"
#include "common/status.h"
#include "job/job_spec.h"

namespace hangar::job {

// For every GPU task group of `spec`: a gpu_models entry that is a model of `topology` stays; one
// that `types` maps (in any case) becomes the models it means. When a group's entries name no
// model at all, neither directly nor through a type, the job could never run: InvalidArgument
// naming the group, the unknown names, the cluster's GPU types and its models. Idempotent.
Status ResolveGpuTypes(const cluster::GpuTypes& types, const cluster::Topology& topology,
                       JobSpec* spec);

}  // namespace hangar::job
