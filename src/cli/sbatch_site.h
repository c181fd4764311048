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
  // A Slurm account -> the queue a job of that account goes to when its script names no
  // partition; with account_is_queue every account is the queue of the same name.
  std::map<std::string, std::string> account_queues;
  bool account_is_queue = false;
};

// The site facts from $HANGAR_SBATCH_GPU_TYPES
// ("a100=A100-SXM-80GB|A100-PCIE-40GB,l40s=L40S-48GB"), $HANGAR_SBATCH_NODE_GPUS ("8") and
// $HANGAR_SBATCH_ACCOUNT_QUEUES ("same", or "ACCOUNT=QUEUE,..."); each may be null or empty. Fails
// naming the variable.
StatusOr<SiteFacts> ParseSiteFacts(const char* gpu_types, const char* node_gpus,
                                   const char* account_queues = nullptr);

// The queue a job of `account` goes to when it names no partition: nullopt when the site maps no
// accounts (the job goes to the default queue); NotFound, naming the mapped accounts, when the
// site maps accounts but not this one.
StatusOr<std::optional<std::string>> QueueOfAccount(const SiteFacts& site,
                                                    const std::string& account);

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
