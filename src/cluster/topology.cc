#include "cluster/topology.h"

#include <algorithm>
#include <map>
#include <numeric>
#include <unordered_set>

#include "cluster/mig_geometry.h"

namespace hangar::cluster {

std::string_view LevelName(Level level) {
  switch (level) {
    case Level::kNvlinkDomain:
      return "nvlink_domain";
    case Level::kNode:
      return "node";
    case Level::kLeaf:
      return "leaf";
    case Level::kSpine:
      return "spine";
    case Level::kCluster:
      return "cluster";
  }
  return "?";
}

std::optional<Level> ParseLevel(std::string_view name) {
  if (name == "nvlink_domain" || name == "nvlink") return Level::kNvlinkDomain;
  if (name == "node") return Level::kNode;
  if (name == "leaf") return Level::kLeaf;
  if (name == "spine") return Level::kSpine;
  if (name == "cluster") return Level::kCluster;
  return std::nullopt;
}

std::optional<uint32_t> Topology::FindNode(std::string_view name) const {
  auto it = node_index_.find(std::string(name));
  if (it == node_index_.end()) return std::nullopt;
  return it->second;
}

std::optional<ModelId> Topology::FindModel(std::string_view name) const {
  for (size_t i = 0; i < models_.size(); ++i) {
    if (models_[i] == name) return static_cast<ModelId>(i);
  }
  return std::nullopt;
}

ModelMask Topology::MaskFor(const std::vector<std::string>& names,
                            std::vector<std::string>* unknown) const {
  if (names.empty()) return kAnyModel;
  ModelMask mask = 0;
  for (const auto& n : names) {
    auto id = FindModel(n);
    if (id) {
      mask |= ModelMask{1} << *id;
    } else if (unknown) {
      unknown->push_back(n);
    }
  }
  return mask;
}

std::string Topology::MaskToString(ModelMask mask) const {
  if (mask == kAnyModel) return "any";
  std::string out;
  for (size_t i = 0; i < models_.size(); ++i) {
    if (mask & (ModelMask{1} << i)) {
      if (!out.empty()) out += "|";
      out += models_[i];
    }
  }
  return out.empty() ? "none of this cluster's models" : out;
}

uint32_t Topology::DomainOf(uint32_t node, Level level) const {
  const NodeInfo& n = nodes_[node];
  switch (level) {
    case Level::kNvlinkDomain:
      return n.num_gpus ? gpus_[n.first_gpu].nvlink_domain : 0;
    case Level::kNode:
      return node;
    case Level::kLeaf:
      return n.leaf;
    case Level::kSpine:
      return n.spine;
    case Level::kCluster:
      return 0;
  }
  return 0;
}

std::pair<uint32_t, uint32_t> Topology::NodeRange(Level level, uint32_t d) const {
  switch (level) {
    case Level::kNvlinkDomain:
      return {nvlink_domains_[d].first_node, nvlink_domains_[d].end_node};
    case Level::kNode:
      return {d, d + 1};
    case Level::kLeaf:
      return {leaves_[d].first_node, leaves_[d].end_node};
    case Level::kSpine:
      return {spines_[d].first_node, spines_[d].end_node};
    case Level::kCluster:
      return {cluster_.first_node, cluster_.end_node};
  }
  return {0, 0};
}

std::string Topology::DomainName(Level level, uint32_t d) const {
  switch (level) {
    case Level::kNvlinkDomain:
      return nvlink_domains_[d].name;
    case Level::kNode:
      return nodes_[d].name;
    case Level::kLeaf:
      return leaves_[d].name;
    case Level::kSpine:
      return spines_[d].name;
    case Level::kCluster:
      return cluster_.name;
  }
  return "";
}

uint32_t Topology::NumDomains(Level level) const {
  switch (level) {
    case Level::kNvlinkDomain:
      return static_cast<uint32_t>(nvlink_domains_.size());
    case Level::kNode:
      return static_cast<uint32_t>(nodes_.size());
    case Level::kLeaf:
      return static_cast<uint32_t>(leaves_.size());
    case Level::kSpine:
      return static_cast<uint32_t>(spines_.size());
    case Level::kCluster:
      return 1;
  }
  return 0;
}

bool Topology::HasLabel(uint32_t node, std::string_view key, std::string_view value) const {
  const Labels& labels = nodes_[node].labels;
  auto it = std::lower_bound(labels.begin(), labels.end(), key,
                             [](const auto& kv, std::string_view k) { return kv.first < k; });
  return it != labels.end() && it->first == key && it->second == value;
}

namespace {

std::string At(const NodeSpec& s) {
  return s.source_line ? "line " + std::to_string(s.source_line) + ": " : "";
}

// Orders node specs by (spine, leaf, rack) first appearance, stable within.
std::vector<size_t> FabricOrder(const std::vector<NodeSpec>& specs) {
  std::map<std::string, size_t> spine_rank, leaf_rank, rack_rank;
  for (const auto& s : specs) {
    spine_rank.emplace(s.spine, spine_rank.size());
    leaf_rank.emplace(s.leaf, leaf_rank.size());
    rack_rank.emplace(s.leaf + "\x1f" + s.rack, rack_rank.size());
  }
  std::vector<size_t> order(specs.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    const auto& x = specs[a];
    const auto& y = specs[b];
    auto kx =
        std::tuple(spine_rank[x.spine], leaf_rank[x.leaf], rack_rank[x.leaf + "\x1f" + x.rack]);
    auto ky =
        std::tuple(spine_rank[y.spine], leaf_rank[y.leaf], rack_rank[y.leaf + "\x1f" + y.rack]);
    return kx < ky;
  });
  return order;
}

}  // namespace

StatusOr<std::shared_ptr<const Topology>> TopologyBuilder::Build() && {
  auto topo = std::make_shared<Topology>();
  topo->name_ = name_.empty() ? "cluster" : name_;
  if (specs_.empty())
    return Status::InvalidArgument("the cluster has no nodes; declare at least one");

  std::unordered_map<std::string, std::string> leaf_spine;
  std::unordered_set<std::string> names;
  for (const auto& s : specs_) {
    if (s.name.empty()) return Status::InvalidArgument(At(s) + "a node has no name");
    if (!names.insert(s.name).second) {
      return Status::InvalidArgument(At(s) + "node '" + s.name + "' is declared twice");
    }
    auto [it, fresh] = leaf_spine.emplace(s.leaf, s.spine);
    if (!fresh && it->second != s.spine) {
      return Status::InvalidArgument(At(s) + "leaf '" + s.leaf + "' appears under spines '" +
                                     it->second + "' and '" + s.spine +
                                     "'; a leaf switch belongs to one spine block");
    }
    if (s.gpus < 0 || s.gpus > kMaxGpusPerNode) {
      return Status::InvalidArgument(At(s) + "node '" + s.name + "' has " + std::to_string(s.gpus) +
                                     " GPUs; a node has 0 to " + std::to_string(kMaxGpusPerNode));
    }
    if (s.gpus > 0 && s.gpu_model.empty()) {
      return Status::InvalidArgument(At(s) + "node '" + s.name + "' has GPUs but no gpu_model");
    }
    if (s.nvlink == NvlinkLayout::kRack && s.rack.empty()) {
      return Status::InvalidArgument(At(s) + "node '" + s.name +
                                     "' has nvlink: rack but no rack; give it a rack name");
    }
  }

  std::vector<size_t> order = FabricOrder(specs_);
  std::map<std::string, uint32_t> rack_domain;  // "leaf\x1frack" -> multi-node NVLink domain
  for (size_t pos = 0; pos < order.size(); ++pos) {
    const NodeSpec& s = specs_[order[pos]];
    const uint32_t n = static_cast<uint32_t>(pos);
    NodeInfo node;
    node.name = s.name;
    node.first_gpu = static_cast<uint32_t>(topo->gpus_.size());
    node.num_gpus = static_cast<uint16_t>(s.gpus);
    node.gpu_memory_mib = s.gpu_memory_mib;
    node.milli_cpu = s.milli_cpu;
    node.memory_mib = s.memory_mib;
    node.rack = s.rack;
    node.group = s.group;
    node.labels = s.labels;
    std::sort(node.labels.begin(), node.labels.end());
    node.source_line = s.source_line;
    node.networks = s.networks;
    if (s.gpus > 0) {
      auto id = topo->FindModel(s.gpu_model);
      if (!id) {
        if (topo->models_.size() >= kMaxModels) {
          return Status::InvalidArgument("more than 64 GPU models in one cluster");
        }
        topo->models_.push_back(s.gpu_model);
        id = static_cast<ModelId>(topo->models_.size() - 1);
      }
      node.model = *id;
    }
    // Fabric domains: leaves and spines in order of first appearance (nodes are sorted).
    if (topo->spines_.empty() || topo->spines_.back().name != s.spine) {
      DomainInfo spine;
      spine.name = s.spine;
      spine.first_node = n;
      spine.first_child = static_cast<uint32_t>(topo->leaves_.size());
      topo->spines_.push_back(spine);
    }
    if (topo->leaves_.empty() || topo->leaves_.back().name != s.leaf) {
      DomainInfo leaf;
      leaf.name = s.leaf;
      leaf.first_node = n;
      leaf.parent = static_cast<uint32_t>(topo->spines_.size() - 1);
      topo->leaves_.push_back(leaf);
    }
    node.leaf = static_cast<uint32_t>(topo->leaves_.size() - 1);
    node.spine = static_cast<uint32_t>(topo->spines_.size() - 1);
    topo->leaves_.back().end_node = n + 1;
    topo->leaves_.back().num_gpus += s.gpus;
    topo->spines_.back().end_node = n + 1;
    topo->spines_.back().end_child = static_cast<uint32_t>(topo->leaves_.size());
    topo->spines_.back().num_gpus += s.gpus;

    // NVLink domains.
    auto new_domain = [&](std::string name) {
      NvlinkDomainInfo d;
      d.name = std::move(name);
      d.first_node = n;
      d.end_node = n + 1;
      topo->nvlink_domains_.push_back(d);
      return static_cast<uint32_t>(topo->nvlink_domains_.size() - 1);
    };
    uint32_t node_domain = 0;
    if (s.gpus > 0 && s.nvlink == NvlinkLayout::kNode)
      node_domain = new_domain(s.name + "/nvswitch");
    if (s.gpus > 0 && s.nvlink == NvlinkLayout::kRack) {
      std::string key = s.leaf + "\x1f" + s.rack;
      auto it = rack_domain.find(key);
      if (it == rack_domain.end()) {
        it = rack_domain.emplace(key, new_domain(s.rack + "/nvlink")).first;
      } else {
        topo->nvlink_domains_[it->second].end_node = n + 1;
        topo->nvlink_domains_[it->second].multi_node = true;
        topo->has_multi_node_nvlink_ = true;
      }
      node_domain = it->second;
    }
    const int numa = std::max(1, s.numa_nodes);
    for (int i = 0; i < s.gpus; ++i) {
      GpuInfo g;
      g.node = n;
      g.index = static_cast<uint16_t>(i);
      g.model = node.model;
      g.memory_mib = s.gpu_memory_mib;
      g.mig = s.mig;
      topo->has_mig_ = topo->has_mig_ || s.mig;
      g.mig_part = MigPartFor(s.gpu_memory_mib);
      g.numa = static_cast<int16_t>(i * numa / s.gpus);
      g.rail = s.rails > 0 ? static_cast<int16_t>(i % s.rails) : -1;
      switch (s.nvlink) {
        case NvlinkLayout::kNode:
        case NvlinkLayout::kRack:
          g.nvlink_domain = node_domain;
          break;
        case NvlinkLayout::kNone:
          g.nvlink_domain = new_domain(s.name + "/gpu" + std::to_string(i));
          break;
        case NvlinkLayout::kPairs:
          g.nvlink_domain = (i % 2 == 0) ? new_domain(s.name + "/pair" + std::to_string(i / 2))
                                         : topo->gpus_.back().nvlink_domain;
          break;
      }
      topo->nvlink_domains_[g.nvlink_domain].num_gpus++;
      topo->gpus_.push_back(g);
    }
    topo->max_gpus_per_node_ = std::max(topo->max_gpus_per_node_, s.gpus);
    topo->max_node_milli_cpu_ = std::max(topo->max_node_milli_cpu_, s.milli_cpu);
    topo->node_index_.emplace(node.name, n);
    topo->nodes_.push_back(std::move(node));
  }
  topo->cluster_.name = topo->name_;
  topo->cluster_.first_node = 0;
  topo->cluster_.end_node = static_cast<uint32_t>(topo->nodes_.size());
  topo->cluster_.first_child = 0;
  topo->cluster_.end_child = static_cast<uint32_t>(topo->spines_.size());
  topo->cluster_.num_gpus = static_cast<uint32_t>(topo->gpus_.size());
  return std::shared_ptr<const Topology>(std::move(topo));
}

}  // namespace hangar::cluster
