// cluster.yaml's `preflight:` block (docs/goodput.md, "Gang preflight"): before a gang over this
// many nodes starts or restarts, its tasks check their nodes together -- each node's validation
// benchmarks and an all-reduce across the gang -- and a node that fails is replaced before the
// job starts.
//
//   preflight: {min_nodes: 2, budget: 60s, allreduce_mib: 64, slow_fraction: 0.85}
#pragma once

#include <cstdint>
#include <string>

#include "common/status.h"
#include "common/time.h"
#include "common/yaml_util.h"

namespace hangar::cluster {

struct PreflightConfig {
  uint32_t min_nodes = 0;          // gangs over at least this many nodes; 0: no preflight
  Duration budget = 60 * kSecond;  // the whole check, rendezvous included
  uint32_t allreduce_mib = 64;     // the all-reduce's buffer
  double slow_fraction = 0.85;     // a GPU below this share of the gang's median fails its node
  bool enabled() const { return min_nodes > 0; }
};

// Parses the block `preflight` of a cluster file. Errors name the line and say what to write.
StatusOr<PreflightConfig> ParsePreflight(const YamlSource& src, const YAML::Node& block);
// The `preflight:` block of the cluster file at `path`; a file without one: no preflight.
StatusOr<PreflightConfig> LoadPreflight(const std::string& path);

}  // namespace hangar::cluster
