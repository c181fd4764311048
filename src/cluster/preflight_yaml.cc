#include "cluster/preflight_yaml.h"

#include <cstdlib>

namespace hangar::cluster {

StatusOr<PreflightConfig> ParsePreflight(const YamlSource& src, const YAML::Node& block) {
  HANGAR_RETURN_IF_ERROR(
      src.CheckKeys(block, "preflight", {"min_nodes", "budget", "allreduce_mib", "slow_fraction"}));
  PreflightConfig c;
  HANGAR_ASSIGN_OR_RETURN(auto min_nodes, src.OptInt(block, "min_nodes", 1, 1'000'000));
  if (!min_nodes) {
    return src.Error(block,
                     "preflight: give min_nodes, the smallest gang (in nodes) to check, e.g. "
                     "{min_nodes: 2}");
  }
  c.min_nodes = static_cast<uint32_t>(*min_nodes);
  HANGAR_ASSIGN_OR_RETURN(auto budget, src.OptString(block, "budget"));
  if (budget) {
    auto d = ParseDuration(*budget);
    if (!d.ok() || *d < kSecond || *d > 10 * kMinute) {
      return src.Error(
          block["budget"],
          "preflight.budget must be from 1s to 10m, such as 60s, not '" + *budget + "'");
    }
    c.budget = *d;
  }
  HANGAR_ASSIGN_OR_RETURN(auto mib, src.OptInt(block, "allreduce_mib", 1, 4096));
  if (mib) c.allreduce_mib = static_cast<uint32_t>(*mib);
  HANGAR_ASSIGN_OR_RETURN(auto slow, src.OptString(block, "slow_fraction"));
  if (slow) {
    char* end = nullptr;
    const double f = std::strtod(slow->c_str(), &end);
    if (end == slow->c_str() || *end != '\0' || !(f > 0 && f < 1)) {
      return src.Error(block["slow_fraction"],
                       "preflight.slow_fraction must be a number between 0 and 1, such as 0.85, "
                       "not '" +
                           *slow + "'");
    }
    c.slow_fraction = f;
  }
  return c;
}

StatusOr<PreflightConfig> LoadPreflight(const std::string& path) {
  HANGAR_ASSIGN_OR_RETURN(YAML::Node root, YamlSource::LoadFile(path));
  if (!root.IsMap() || !root["preflight"]) return PreflightConfig{};
  return ParsePreflight(YamlSource(path), root["preflight"]);
}

}  // namespace hangar::cluster
