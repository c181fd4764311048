#include "cluster/spares_yaml.h"

#include <algorithm>

#include "cluster/hostlist.h"

namespace hangar::cluster {
namespace {

// The nodes of a named pool, each a name or a range ("gpu-[14-15]").
Status ParsePool(const YamlSource& src, const YAML::Node& list, const Topology& topo,
                 SparesConfig* out) {
  if (!list.IsSequence() || list.size() == 0)
    return src.Error(list, "spares.nodes must be a non-empty list of node names, e.g. [gpu-07]");
  for (const auto& item : list) {
    HANGAR_ASSIGN_OR_RETURN(auto names, ExpandHostList(item.as<std::string>("")));
    for (const std::string& name : names) {
      auto n = topo.FindNode(name);
      if (!n) return src.Error(item, "spares.nodes: no node '" + name + "' in this cluster");
      out->nodes.push_back(*n);
    }
  }
  std::sort(out->nodes.begin(), out->nodes.end());
  out->nodes.erase(std::unique(out->nodes.begin(), out->nodes.end()), out->nodes.end());
  if (out->nodes.size() >= topo.nodes().size())
    return src.Error(list, "spares.nodes names every node of the cluster: leave some for work");
  return Status::Ok();
}

// A count per domain must leave every domain at `per` a node for work.
Status CheckCount(const YamlSource& src, const YAML::Node& at, const Topology& topo,
                  const SparesConfig& c) {
  for (uint32_t d = 0; d < topo.NumDomains(c.per); ++d) {
    const auto [first, end] = topo.NodeRange(c.per, d);
    if (end - first <= c.count) {
      return src.Error(at, "spares.count " + std::to_string(c.count) + " per " +
                               std::string(LevelName(c.per)) + " leaves no node for work in " +
                               topo.DomainName(c.per, d) + " (" + std::to_string(end - first) +
                               " nodes); lower the count or count per a wider domain");
    }
  }
  return Status::Ok();
}

}  // namespace

StatusOr<SparesConfig> ParseSpares(const YamlSource& src, const YAML::Node& spares,
                                   const Topology& topo) {
  HANGAR_RETURN_IF_ERROR(src.CheckKeys(spares, "spares", {"per", "count", "nodes"}));
  SparesConfig c;
  HANGAR_ASSIGN_OR_RETURN(auto per, src.OptString(spares, "per"));
  HANGAR_ASSIGN_OR_RETURN(auto count, src.OptInt(spares, "count", 1, 1'000'000));
  if (spares["nodes"] && (count || per)) {
    return src.Error(spares,
                     "spares: give either a named pool (nodes) or a count per domain (per, "
                     "count), not both");
  }
  if (spares["nodes"]) {
    HANGAR_RETURN_IF_ERROR(ParsePool(src, spares["nodes"], topo, &c));
    return c;
  }
  if (!count) {
    return src.Error(spares,
                     "spares: give a count per domain (e.g. {per: leaf, count: 1}) or a named "
                     "pool (e.g. {nodes: [gpu-07]})");
  }
  if (per) {
    auto level = ParseLevel(*per);
    if (!level || *level < Level::kLeaf) {
      return src.Error(spares["per"],
                       "spares.per must be leaf, spine or cluster, not '" + *per + "'");
    }
    c.per = *level;
  }
  c.count = static_cast<uint32_t>(*count);
  HANGAR_RETURN_IF_ERROR(CheckCount(src, spares["count"], topo, c));
  return c;
}

StatusOr<SparesConfig> LoadSpares(const std::string& path, const Topology& topo) {
  HANGAR_ASSIGN_OR_RETURN(YAML::Node root, YamlSource::LoadFile(path));
  if (!root.IsMap() || !root["spares"]) return SparesConfig{};
  return ParseSpares(YamlSource(path), root["spares"], topo);
}

}  // namespace hangar::cluster
