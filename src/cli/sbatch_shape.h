// What a batch script's resource options come to, per Slurm node: how many nodes, how many tasks
// on each, and what each node's replica asks (GPUs, their models, CPUs, memory, node labels), as
// Slurm derives them from whichever options the script gives (--ntasks with --ntasks-per-node
// makes the node count, --gpus is spread over the nodes, --exclusive takes whole nodes' GPUs).
#pragma once

#include <nlohmann/json.hpp>

#include "cli/sbatch_script.h"
#include "cli/sbatch_site.h"

namespace hangar::cli::sbatch {

// What one replica (one Slurm node) runs and asks.
struct Shape {
  int nodes = 1;
  int tasks_per_node = 1;
  int gpus = 0;  // per node
};

// Options that disagree, or that Hangar's equal replicas cannot hold (5 tasks on 2 nodes), are
// errors in `d` naming every line involved; what is left out is a warning.
Shape ResolveShape(const SbatchOptions& o, const SiteFacts& site, Diagnostics* d);

// The task group's resource fields (gpus, gpu_models, cpu_per_gpu, memory_per_gpu, cpu, memory,
// node_selector) for one replica of `s`.
void AddResources(const SbatchOptions& o, const Shape& s, const SiteFacts& site,
                  nlohmann::ordered_json* group, Diagnostics* d);

}  // namespace hangar::cli::sbatch
