#include "cluster/topology_discovered.h"

#include <algorithm>
#include <functional>
#include <map>

namespace hangar::cluster {
namespace {

// The places of declared nodes, by node index (declared order).
std::map<uint32_t, const DiscoveredPlace*> ByNode(const Topology& t,
                                                  const std::vector<DiscoveredPlace>& places) {
  std::map<uint32_t, const DiscoveredPlace*> out;
  for (const auto& p : places) {
    if (auto n = t.FindNode(p.node)) out[*n] = &p;
  }
  return out;
}

// The value most of `nodes` have (ties: the first met); "" when none has one.
std::string Majority(const std::vector<std::string>& values) {
  std::map<std::string, size_t> count;
  std::string best;
  size_t best_n = 0;
  for (const auto& v : values) {
    if (v.empty()) continue;
    const size_t n = ++count[v];
    if (n > best_n) best = v, best_n = n;
  }
  return best;
}

std::string SwitchLabel(const DiscoveredPlace& p) {
  return "0x" + p.switch_guid + (p.switch_name.empty() ? "" : " (" + p.switch_name + ")");
}

// Declared domain -> the key most of its nodes report, for one level and one key of a place.
struct DomainKeys {
  std::map<uint32_t, std::string> majority;  // domain -> key
  std::map<std::string, uint32_t> owner;     // key -> the first domain whose majority it is
  std::map<uint32_t, size_t> reporting;      // domain -> nodes that told a key
};

DomainKeys MajorityKeys(const Topology& t, Level level,
                        const std::map<uint32_t, const DiscoveredPlace*>& by_node,
                        const std::function<std::string(const DiscoveredPlace&)>& key) {
  std::map<uint32_t, std::vector<std::string>> told;
  for (const auto& [n, p] : by_node) {
    if (level == Level::kNvlinkDomain && t.nodes()[n].num_gpus == 0) continue;
    if (!key(*p).empty()) told[t.DomainOf(n, level)].push_back(key(*p));
  }
  DomainKeys out;
  for (const auto& [d, keys] : told) {
    out.majority[d] = Majority(keys);
    out.owner.try_emplace(out.majority[d], d);
    out.reporting[d] = keys.size();
  }
  return out;
}

void DiffLeaves(const Topology& t, const std::map<uint32_t, const DiscoveredPlace*>& by_node,
                std::vector<Disagreement>* out) {
  const DomainKeys k = MajorityKeys(t, Level::kLeaf, by_node,
                                    [](const DiscoveredPlace& p) { return p.switch_guid; });
  for (const auto& [n, p] : by_node) {
    if (p->switch_guid.empty()) continue;
    const uint32_t leaf = t.DomainOf(n, Level::kLeaf);
    const std::string& leaf_name = t.leaves()[leaf].name;
    const std::string& expected = k.majority.at(leaf);
    const bool shared = k.owner.at(expected) != leaf;  // another leaf's nodes report this switch
    if (p->switch_guid == expected && !shared) continue;
    std::string msg = p->node + ": declared on " + leaf_name + ", but its IB port " + p->port +
                      " reports switch " + SwitchLabel(*p);
    auto other = k.owner.find(p->switch_guid);
    if (p->switch_guid == expected) {
      msg += ", which " + t.leaves()[other->second].name +
             "'s nodes report too: cluster.yaml declares one switch as two leaves; merge them";
    } else if (other != k.owner.end() && other->second != leaf) {
      msg += ", which " + t.leaves()[other->second].name + "'s other nodes report; move it under " +
             t.leaves()[other->second].name + " in cluster.yaml or fix its cabling";
    } else {
      msg += ", not switch 0x" + expected + " that " + leaf_name +
             "'s other nodes report; no declared leaf is on that switch: fix cluster.yaml or its "
             "cabling";
    }
    out->push_back({p->node, std::move(msg)});
  }
}

void DiffNvlink(const Topology& t, const std::map<uint32_t, const DiscoveredPlace*>& by_node,
                std::vector<Disagreement>* out) {
  const DomainKeys k = MajorityKeys(t, Level::kNvlinkDomain, by_node,
                                    [](const DiscoveredPlace& p) { return p.nvlink_fabric; });
  for (const auto& [n, p] : by_node) {
    if (t.nodes()[n].num_gpus == 0) continue;  // no GPU, no NVLink domain
    const uint32_t d = t.DomainOf(n, Level::kNvlinkDomain);
    const NvlinkDomainInfo& dom = t.nvlink_domains()[d];
    if (p->nvlink_fabric.empty()) {
      // Declared in a multi-node domain whose other nodes report a fabric it does not.
      if (dom.multi_node && k.majority.count(d)) {
        out->push_back({p->node, p->node + ": declared in NVLink domain " + dom.name +
                                     ", but its GPUs report no NVLink fabric while the domain's "
                                     "other nodes report clique " +
                                     k.majority.at(d)});
      }
      continue;
    }
    const std::string& expected = k.majority.at(d);
    if (!dom.multi_node && k.reporting.at(d) == 1) {
      // A single-node domain: wrong only when another declared domain has its clique.
      auto other = k.owner.find(p->nvlink_fabric);
      if (other == k.owner.end() || other->second == d) continue;
      out->push_back({p->node, p->node + ": declared alone in NVLink domain " + dom.name +
                                   ", but its GPUs report clique " + p->nvlink_fabric +
                                   ", which NVLink domain " +
                                   t.nvlink_domains()[other->second].name +
                                   "'s nodes report; declare it in that rack"});
      continue;
    }
    if (p->nvlink_fabric == expected) continue;
    auto other = k.owner.find(p->nvlink_fabric);
    std::string msg = p->node + ": declared in NVLink domain " + dom.name +
                      ", but its GPUs report clique " + p->nvlink_fabric + ", not " + expected +
                      " that the domain's other nodes report";
    if (other != k.owner.end() && other->second != d)
      msg += "; NVLink domain " + t.nvlink_domains()[other->second].name + "'s nodes report it";
    out->push_back({p->node, std::move(msg)});
  }
}

}  // namespace

DiscoveredTree AssembleDiscovered(const Topology& declared,
                                  const std::vector<DiscoveredPlace>& places) {
  DiscoveredTree tree;
  const auto by_node = ByNode(declared, places);
  std::map<std::string, size_t> leaf_of;  // switch guid (or "declared:" + leaf) -> index
  std::map<std::string, size_t> domain_of;
  std::vector<std::vector<std::string>> spines;  // declared spine of each leaf's nodes
  // A node that told no switch goes where most of its declared leaf's nodes were found.
  const DomainKeys found = MajorityKeys(declared, Level::kLeaf, by_node,
                                        [](const DiscoveredPlace& p) { return p.switch_guid; });
  std::map<std::string, const DiscoveredPlace*> teller;  // switch guid -> the first to tell it
  for (const auto& [n, p] : by_node) {
    if (!p->switch_guid.empty()) teller.try_emplace(p->switch_guid, p);
  }
  for (uint32_t n = 0; n < declared.nodes().size(); ++n) {
    const NodeInfo& node = declared.nodes()[n];
    auto it = by_node.find(n);
    const DiscoveredPlace* p = it == by_node.end() ? nullptr : it->second;
    const bool told = p && !p->switch_guid.empty();
    if (!told) tree.unplaced.push_back(node.name);
    auto guess = found.majority.find(node.leaf);
    const std::string guid = told                            ? p->switch_guid
                             : guess != found.majority.end() ? guess->second
                                                             : "";
    const std::string key = !guid.empty() ? guid : "declared:" + declared.leaves()[node.leaf].name;
    auto [slot, fresh] = leaf_of.try_emplace(key, tree.leaves.size());
    if (fresh) {
      DiscoveredTree::Leaf l;
      l.switch_guid = guid;
      const DiscoveredPlace* t = guid.empty() ? nullptr : teller.at(guid);
      l.name = !t                       ? declared.leaves()[node.leaf].name
               : t->switch_name.empty() ? "switch-" + guid
                                        : t->switch_name;
      tree.leaves.push_back(std::move(l));
      spines.emplace_back();
    }
    tree.leaves[slot->second].nodes.push_back(node.name);
    spines[slot->second].push_back(declared.spines()[node.spine].name);
    if (p && !p->nvlink_fabric.empty()) {
      auto [d, new_domain] = domain_of.try_emplace(p->nvlink_fabric, tree.nvlink_domains.size());
      if (new_domain) tree.nvlink_domains.push_back({p->nvlink_fabric, {}});
      tree.nvlink_domains[d->second].nodes.push_back(node.name);
    }
  }
  for (size_t i = 0; i < tree.leaves.size(); ++i) tree.leaves[i].spine = Majority(spines[i]);
  return tree;
}

ImportedFabric DiscoveredTree::AsFabric() const {
  ImportedFabric f;
  std::map<std::string, size_t> spine_of;
  for (const Leaf& l : leaves) {
    auto [it, fresh] = spine_of.try_emplace(l.spine, f.spines.size());
    if (fresh) f.spines.push_back({l.spine, {}});
    f.spines[it->second].leaves.push_back({l.name, l.nodes});
  }
  // Each multi-node NVLink domain a rack of its own ("nvl-1", ...), in the order found.
  int rack = 0;
  for (const NvlinkDomain& d : nvlink_domains) {
    if (d.nodes.size() < 2) continue;
    const std::string name = "nvl-" + std::to_string(++rack);
    for (const auto& n : d.nodes) f.nvlink_racks[n] = name;
  }
  return f;
}

std::vector<Disagreement> DiffDiscovered(const Topology& declared,
                                         const std::vector<DiscoveredPlace>& places) {
  const auto by_node = ByNode(declared, places);
  std::vector<Disagreement> out;
  DiffLeaves(declared, by_node, &out);
  DiffNvlink(declared, by_node, &out);
  std::stable_sort(out.begin(), out.end(), [&](const Disagreement& a, const Disagreement& b) {
    return *declared.FindNode(a.node) < *declared.FindNode(b.node);
  });
  return out;
}

}  // namespace hangar::cluster
