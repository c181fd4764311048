// Reads cluster.yaml (docs/cluster-format.md) into a Topology. Errors name file:line and say what
// to write instead.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "cluster/topology.h"
#include "common/status.h"

namespace hangar::cluster {

// Per node group: the software a node is expected to run (for config-drift checks).
struct ConfigBaseline {
  std::string group;  // "" matches every node
  std::string driver_version;
  std::string cuda_version;
  std::string kernel_version;
  std::string ofed_version;
};

struct ClusterFile {
  std::shared_ptr<const Topology> topology;
  std::vector<ConfigBaseline> baselines;
  // containers.mounts_allowed: host paths container tasks may mount (and what lies below them).
  std::vector<std::string> mounts_allowed;
};

StatusOr<ClusterFile> LoadClusterFile(const std::string& path);
// `source_name` is what errors call the document.
StatusOr<ClusterFile> ParseClusterYaml(std::string_view text, const std::string& source_name);

// Expands "gpu-[00-15]" into gpu-00 ... gpu-15 (zero padded to the width of the first bound);
// a name without brackets is returned as is.
StatusOr<std::vector<std::string>> ExpandNameRange(std::string_view pattern);

}  // namespace hangar::cluster
