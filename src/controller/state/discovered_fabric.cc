#include "controller/state/discovered_fabric.h"

#include <google/protobuf/util/json_util.h>

namespace hangar::controller {

namespace pb = ::hangar::agent::v1;

void DiscoveredFabric::Observe(uint32_t n, const pb::DiscoveredTopology& report) {
  if (n >= declared_.nodes().size()) return;
  const bool known = reports_.count(n) > 0;
  const cluster::DiscoveredPlace before = Place(n);
  reports_[n] = report;
  const cluster::DiscoveredPlace after = Place(n);
  if (!known || before.switch_guid != after.switch_guid || before.port != after.port ||
      before.switch_name != after.switch_name || before.nvlink_fabric != after.nvlink_fabric) {
    dirty_ = true;
  }
}

std::vector<cluster::Disagreement> DiscoveredFabric::TakeChanges() {
  if (!dirty_) return {};
  dirty_ = false;
  std::vector<cluster::Disagreement> changed;
  std::map<std::string, std::string> now;
  for (auto& d : Diff()) {
    auto it = told_.find(d.node);
    if (it == told_.end() || it->second != d.message) changed.push_back(d);
    now[d.node] = d.message;
  }
  told_ = std::move(now);
  return changed;
}

cluster::DiscoveredPlace DiscoveredFabric::Place(uint32_t n) const {
  cluster::DiscoveredPlace p;
  p.node = declared_.nodes()[n].name;
  auto it = reports_.find(n);
  if (it == reports_.end()) return p;
  for (const pb::DiscoveredIbPort& port : it->second.ib_ports()) {
    p.switch_guid = cluster::NormalizeGuid(port.switch_guid());
    if (p.switch_guid.empty()) continue;
    p.switch_name = port.switch_name();
    p.port = port.device() + "/" + std::to_string(port.port());
    break;
  }
  for (const pb::DiscoveredGpu& g : it->second.gpus()) {
    if (g.fabric_state() != "completed" || g.fabric_cluster_uuid().empty()) continue;
    p.nvlink_fabric = g.fabric_cluster_uuid() + "/" + std::to_string(g.fabric_clique_id());
    break;
  }
  return p;
}

std::vector<cluster::DiscoveredPlace> DiscoveredFabric::Places() const {
  std::vector<cluster::DiscoveredPlace> out;
  for (const auto& [n, report] : reports_) out.push_back(Place(n));
  return out;
}

cluster::DiscoveredTree DiscoveredFabric::Tree() const {
  return cluster::AssembleDiscovered(declared_, Places());
}

std::vector<cluster::Disagreement> DiscoveredFabric::Diff() const {
  return cluster::DiffDiscovered(declared_, Places());
}

nlohmann::json DiscoveredFabric::Json() const {
  nlohmann::json nodes = nlohmann::json::object();
  google::protobuf::util::JsonPrintOptions opts;
  opts.preserve_proto_field_names = true;
  for (const auto& [n, report] : reports_) {
    std::string text;
    (void)google::protobuf::util::MessageToJsonString(report, &text, opts);
    nodes[declared_.nodes()[n].name] = nlohmann::json::parse(text, nullptr, false);
  }
  const cluster::DiscoveredTree t = Tree();
  nlohmann::json leaves = nlohmann::json::array();
  for (const auto& l : t.leaves) {
    leaves.push_back({{"name", l.name},
                      {"switch_guid", l.switch_guid.empty() ? "" : "0x" + l.switch_guid},
                      {"spine", l.spine},
                      {"nodes", l.nodes}});
  }
  nlohmann::json domains = nlohmann::json::array();
  for (const auto& d : t.nvlink_domains)
    domains.push_back({{"fabric", d.fabric}, {"nodes", d.nodes}});
  nlohmann::json diff = nlohmann::json::array();
  for (const auto& d : Diff()) diff.push_back({{"node", d.node}, {"message", d.message}});
  return {{"nodes", std::move(nodes)},
          {"reported", reports_.size()},
          {"declared", declared_.nodes().size()},
          {"tree",
           {{"leaves", std::move(leaves)},
            {"nvlink_domains", std::move(domains)},
            {"unplaced", t.unplaced}}},
          {"disagreements", std::move(diff)}};
}

}  // namespace hangar::controller
