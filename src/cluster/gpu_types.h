// Slurm's GPU type names as this cluster's models, from cluster.yaml:
//
//   gpu_types: {a100: "NVIDIA A100-SXM4-80GB", l40s: [L40S-48GB, L40S]}
//
// so that a Slurm script's `--gres=gpu:a100:1` or `--gpus-per-task=l40s:1` asks for the models a
// site means by them. Types match without regard to case (Slurm sites write A100 and a100).
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "cluster/topology.h"
#include "common/status.h"
#include "common/yaml_util.h"

namespace hangar::cluster {

struct GpuTypes {
  std::map<std::string, std::vector<std::string>> types;  // lower-case type -> models (any of)

  bool empty() const { return types.empty(); }
  // The models `type` means; nullopt when the cluster maps no such type.
  std::optional<std::vector<std::string>> ModelsOf(std::string_view type) const;
  // "a100, l40s", or "none" when the cluster maps no type.
  std::string Names() const;
};

// Reads `gpu_types` (a map of TYPE: MODEL or TYPE: [MODEL, ...]). Every model must be a node's
// gpu_model in `topology`; a type given twice (in any case) is refused. Errors name file:line.
StatusOr<GpuTypes> ParseGpuTypes(const YamlSource& src, const YAML::Node& node,
                                 const Topology& topology);

}  // namespace hangar::cluster
