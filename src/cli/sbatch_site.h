// What `hangar sbatch` may know of the cluster it submits to, so that a Slurm script's words in
// the site's own terms can be honoured: Slurm GPU type names (`--gres=gpu:a100:2`,
// `--gpus-per-task=l40s:1`, `-C volta32gb`) and the GPUs of a whole node (`--exclusive`). Both
// are optional; without them the converter says, in a warning, what it could not honour. Pure
// functions: the command reads the environment and passes the text in.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/status.h"

namespace hangar::cli::sbatch {

struct SiteFacts {
  int node_gpus = 0;  // GPUs of a whole node; 0: unknown
  // Slurm GPU type, lower case -> the Hangar model names it means (any of them).
  std::map<std::string, std::vector<std::string>> gpu_types;
  // The job goes to a controller, which maps a GPU type this mapping lacks through its
  // cluster.yaml's gpu_types (or refuses it, naming the types it knows): no warning is due.
  bool controller_maps_types = false;
};

// The site facts from $HANGAR_SBATCH_GPU_TYPES ("a100=A100-SXM-80GB|A100-PCIE-40GB,l40s=L40S-48GB")
// and $HANGAR_SBATCH_NODE_GPUS ("8"); either may be null or empty. Fails naming the variable.
StatusOr<SiteFacts> ParseSiteFacts(const char* gpu_types, const char* node_gpus);

// The models a Slurm GPU type means at this site, or nullopt when the site maps no such type.
// Matching ignores case; a type that is itself one of the mapped model names stands for itself.
std::optional<std::vector<std::string>> ModelsOfGpuType(const SiteFacts& site,
                                                        std::string_view type);

// A --constraint as what a job file can say: every `&`-joined feature is a node label
// `FEATURE: "true"`, except features the site maps as GPU types, which become models; a choice
// (`a|b`, `[a|b]`) can be said only when every choice is a mapped GPU type. What cannot be said is
// left out, with a sentence in `dropped` for each part.
struct NodeRequirements {
  std::vector<std::pair<std::string, std::string>> labels;  // sorted by key
  std::vector<std::string> models;                          // any of; empty: any
  std::vector<std::string> dropped;
};
NodeRequirements ConstraintToNodes(std::string_view constraint, const SiteFacts& site);

}  // namespace hangar::cli::sbatch
