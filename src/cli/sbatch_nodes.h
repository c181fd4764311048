// Slurm's --nodelist/-w and --exclude/-x as the job file's include_nodes and exclude_nodes
// (docs/job-format.md, "Node rules"), which the scheduler enforces: the job never runs on an
// excluded node, and its allocation includes every listed one.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "cli/sbatch_script.h"
#include "common/status.h"

namespace hangar::cli::sbatch {

// Adds include_nodes/exclude_nodes to the job file `j` for a job of `nodes` Slurm nodes. A
// nodelist longer than the job's nodes is refused naming both lines (each listed node holds one
// of the job's nodes), as is a node both listed and excluded.
void AddNodeRules(const SbatchOptions& o, int nodes, nlohmann::ordered_json* j, Diagnostics* d);

}  // namespace hangar::cli::sbatch
