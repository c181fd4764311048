// cluster.yaml's `spares:` block (docs/cluster-format.md, "Hot spares"): the nodes the controller
// keeps free of guaranteed work so that a running gang can replace a failed node in place.
//
//   spares: {per: leaf, count: 1}        # one spare in each leaf (or spine, or the cluster)
//   spares: {nodes: [gpu-07, "gpu-[14-15]"]}   # a named pool
#pragma once

#include <string>
#include <vector>

#include "cluster/topology.h"
#include "common/status.h"
#include "common/yaml_util.h"

namespace hangar::cluster {

struct SparesConfig {
  Level per = Level::kLeaf;     // the domain a count applies to: leaf, spine or cluster
  uint32_t count = 0;           // spare nodes kept in each domain at `per`
  std::vector<uint32_t> nodes;  // a named pool, by node index (sorted); empty: by count
  bool enabled() const { return count > 0 || !nodes.empty(); }
};

// Parses the block `spares` of a cluster file whose nodes are `topo`. Errors name the line and say
// what to write instead.
StatusOr<SparesConfig> ParseSpares(const YamlSource& src, const YAML::Node& spares,
                                   const Topology& topo);
// The `spares:` block of the cluster file at `path` (already loaded into `topo` by
// LoadClusterFile); a file without one gives a config that keeps no spares.
StatusOr<SparesConfig> LoadSpares(const std::string& path, const Topology& topo);

}  // namespace hangar::cluster
