#include "sched/node_rule.h"

#include <algorithm>

#include "cluster/hostlist.h"

namespace hangar::sched {

bool NodeRule::Excludes(uint32_t node) const {
  return !excluded.empty() && std::binary_search(excluded.begin(), excluded.end(), node);
}

namespace {

// The indices of `names` (sorted); the names the cluster lacks go to `unknown`.
std::vector<uint32_t> Resolve(const std::vector<std::string>& names, const cluster::Topology& t,
                              std::vector<std::string>* unknown) {
  std::vector<uint32_t> out;
  for (const auto& name : names) {
    if (auto n = t.FindNode(name)) {
      out.push_back(*n);
    } else {
      unknown->push_back(name);
    }
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

}  // namespace

NodeRule CompileNodeRule(const job::NodeListSpec& nodes, const cluster::Topology& t) {
  NodeRule rule;
  if (nodes.empty()) return rule;
  std::vector<std::string> unknown;
  rule.excluded = Resolve(nodes.exclude, t, &unknown);
  unknown.clear();
  rule.required = Resolve(nodes.include, t, &unknown);
  rule.required_missing = !unknown.empty();
  return rule;
}

Status CheckNodeNames(const job::NodeListSpec& nodes, const cluster::Topology& t) {
  for (auto [field, names] :
       {std::pair{"include_nodes", &nodes.include}, std::pair{"exclude_nodes", &nodes.exclude}}) {
    std::vector<std::string> unknown;
    Resolve(*names, t, &unknown);
    if (unknown.empty()) continue;
    std::vector<std::string> all;
    for (const auto& node : t.nodes()) all.push_back(node.name);
    std::string known = cluster::CompressHostList(all);
    if (known.size() > 300) known = known.substr(0, 300) + "...";
    return Status::InvalidArgument(std::string(field) + " names " +
                                   cluster::CompressHostList(unknown) +
                                   ", not a node of this cluster; the nodes are: " + known);
  }
  return Status::Ok();
}

std::string NodeNames(const cluster::Topology& t, const std::vector<uint32_t>& nodes) {
  std::vector<std::string> names;
  for (uint32_t n : nodes) names.push_back(t.nodes()[n].name);
  return cluster::CompressHostList(names);
}

}  // namespace hangar::sched
