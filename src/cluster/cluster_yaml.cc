#include "cluster/cluster_yaml.h"

#include <arpa/inet.h>

#include <algorithm>
#include <charconv>
#include <climits>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "cluster/preflight_yaml.h"
#include "cluster/spares_yaml.h"
#include "common/units.h"
#include "common/yaml_util.h"

namespace hangar::cluster {
namespace {

constexpr std::string_view kNodeKeys[] = {
    "name",           "gpus",   "gpu_model", "gpu_memory",         "cpu",
    "memory",         "nvlink", "mig",       "numa_nodes",         "rails",
    "rack",           "labels", "group",     "management_address", "data_address",
    "data_interfaces"};

bool IsIpAddress(const std::string& s) {
  unsigned char buf[16];
  return inet_pton(AF_INET, s.c_str(), buf) == 1 || inet_pton(AF_INET6, s.c_str(), buf) == 1;
}

std::string FormatCores(int64_t milli) { return FormatMilli(milli) + " cores"; }

class ClusterParser {
 public:
  explicit ClusterParser(const YamlSource& src) : src_(src) {}

  StatusOr<ClusterFile> Parse(const YAML::Node& root) {
    HANGAR_RETURN_IF_ERROR(src_.CheckKeys(
        root, "the cluster file",
        {"name", "node_defaults", "nodes", "fabric", "fat_tree", "baselines", "containers", "data",
         "gpu_models", "mig", "networks", "gpu_types", "spares", "preflight"}));
    HANGAR_ASSIGN_OR_RETURN(auto name, src_.OptString(root, "name"));
    NodeSpec defaults;
    defaults.nvlink = NvlinkLayout::kNode;
    if (root["node_defaults"]) {
      HANGAR_RETURN_IF_ERROR(ApplyNodeFields(root["node_defaults"], "node_defaults", &defaults));
    }
    TopologyBuilder builder(name.value_or("cluster"));
    int forms = !!root["nodes"] + !!root["fabric"] + !!root["fat_tree"];
    if (forms != 1) {
      return src_.Error(root,
                        "declare the nodes in exactly one of 'nodes' (flat), 'fabric' "
                        "(spines > leaves > nodes) or 'fat_tree' (generated)");
    }
    if (root["nodes"]) {
      HANGAR_RETURN_IF_ERROR(AddNodeList(root["nodes"], defaults, "spine-0", "leaf-0", &builder));
    } else if (root["fabric"]) {
      HANGAR_RETURN_IF_ERROR(AddFabric(root["fabric"], defaults, &builder));
    } else {
      HANGAR_RETURN_IF_ERROR(AddFatTree(root["fat_tree"], defaults, &builder));
    }
    ClusterFile out;
    if (root["baselines"]) HANGAR_RETURN_IF_ERROR(ParseBaselines(root["baselines"], &out));
    if (root["containers"]) HANGAR_RETURN_IF_ERROR(ParseContainers(root["containers"], &out));
    if (root["data"]) HANGAR_RETURN_IF_ERROR(ParseData(root["data"], &out.data));
    if (root["networks"]) HANGAR_RETURN_IF_ERROR(ParseNetworks(root["networks"], &out));
    HANGAR_RETURN_IF_ERROR(CheckNodeNetworks(builder, out.management_network));
    auto topo = std::move(builder).Build();
    if (!topo.ok()) return topo.status().WithPrefix(src_.name());
    out.topology = std::move(topo).value();
    if (root["mig"]) HANGAR_RETURN_IF_ERROR(ParseMig(root["mig"], &out));
    if (root["gpu_models"]) HANGAR_RETURN_IF_ERROR(ParseGpuModels(root["gpu_models"], &out));
    if (root["gpu_types"]) {
      HANGAR_ASSIGN_OR_RETURN(out.gpu_types, ParseGpuTypes(src_, root["gpu_types"], *out.topology));
    }
    // Checked here so that a mistake fails the file wherever it is loaded; the controller reads
    // the block itself (LoadSpares).
    if (root["spares"]) {
      HANGAR_RETURN_IF_ERROR(ParseSpares(src_, root["spares"], *out.topology).status());
    }
    if (root["preflight"]) HANGAR_RETURN_IF_ERROR(ParsePreflight(src_, root["preflight"]).status());
    return out;
  }

 private:
  Status ApplyNodeFields(const YAML::Node& n, std::string_view what, NodeSpec* spec) {
    HANGAR_RETURN_IF_ERROR(src_.CheckKeys(n, what, kNodeKeys));
    if (what == "node_defaults") {
      for (const char* key : {"management_address", "data_address"}) {
        if (n[key])
          return src_.Error(
              n[key], std::string(key) +
                          " belongs on a node entry (each node has its own), not in node_defaults");
      }
    }
    spec->source_line = n.Mark().line + 1;
    HANGAR_ASSIGN_OR_RETURN(auto gpus, src_.OptInt(n, "gpus", 0, kMaxGpusPerNode));
    if (gpus) spec->gpus = static_cast<int>(*gpus);
    HANGAR_ASSIGN_OR_RETURN(auto model, src_.OptString(n, "gpu_model"));
    if (model) spec->gpu_model = *model;
    for (auto [key, field] :
         {std::pair{"gpu_memory", &spec->gpu_memory_mib}, std::pair{"memory", &spec->memory_mib}}) {
      HANGAR_ASSIGN_OR_RETURN(auto text, src_.OptString(n, key));
      if (!text) continue;
      auto mib = ParseMemoryMiB(*text);
      if (!mib.ok()) return src_.Error(n[key], std::string(key) + ": " + mib.status().message());
      *field = *mib;
    }
    HANGAR_ASSIGN_OR_RETURN(auto cpu, src_.OptString(n, "cpu"));
    if (cpu) {
      auto milli = ParseMilliCpu(*cpu);
      if (!milli.ok()) return src_.Error(n["cpu"], "cpu: " + milli.status().message());
      spec->milli_cpu = *milli;
    }
    HANGAR_ASSIGN_OR_RETURN(auto nvlink, src_.OptString(n, "nvlink"));
    if (nvlink) {
      if (*nvlink == "node")
        spec->nvlink = NvlinkLayout::kNode;
      else if (*nvlink == "none")
        spec->nvlink = NvlinkLayout::kNone;
      else if (*nvlink == "pairs")
        spec->nvlink = NvlinkLayout::kPairs;
      else if (*nvlink == "rack")
        spec->nvlink = NvlinkLayout::kRack;
      else
        return src_.Error(n["nvlink"],
                          "nvlink must be node, none, pairs or rack, not '" + *nvlink + "'");
    }
    HANGAR_ASSIGN_OR_RETURN(auto mig, src_.OptBool(n, "mig"));
    if (mig) spec->mig = *mig;
    HANGAR_ASSIGN_OR_RETURN(auto numa, src_.OptInt(n, "numa_nodes", 1, 16));
    if (numa) spec->numa_nodes = static_cast<int>(*numa);
    HANGAR_ASSIGN_OR_RETURN(auto rails, src_.OptInt(n, "rails", 0, 64));
    if (rails) spec->rails = static_cast<int>(*rails);
    if (const YAML::Node ifs = n["data_interfaces"]) {
      HANGAR_RETURN_IF_ERROR(ParseDataInterfaces(ifs, &spec->networks.data_interfaces));
    }
    HANGAR_ASSIGN_OR_RETURN(auto rack, src_.OptString(n, "rack"));
    if (rack) spec->rack = *rack;
    HANGAR_ASSIGN_OR_RETURN(auto group, src_.OptString(n, "group"));
    if (group) spec->group = *group;
    if (const YAML::Node labels = n["labels"]) {
      if (!labels.IsMap()) return src_.Error(labels, "labels must be a map of key: value");
      for (const auto& kv : labels) {
        std::string key = kv.first.as<std::string>(""), value = kv.second.as<std::string>("");
        bool replaced = false;
        for (auto& [k, v] : spec->labels) {
          if (k == key) v = value, replaced = true;
        }
        if (!replaced) spec->labels.emplace_back(key, value);
      }
    }
    return Status::Ok();
  }

  // data_interfaces: one per rail, rail 0 first; each a netdev name ("eth1") or
  // {netdev: eth1, hca: mlx5_0}.
  Status ParseDataInterfaces(const YAML::Node& ifs, std::vector<DataInterface>* out) {
    const char* example =
        "e.g. [{netdev: ib0, hca: mlx5_0}, {netdev: ib1, hca: mlx5_1}] or [eth1, eth2]";
    if (!ifs.IsSequence() || ifs.size() == 0 || ifs.size() > 64) {
      return src_.Error(
          ifs,
          std::string("data_interfaces must list 1 to 64 interfaces, one per rail, ") + example);
    }
    out->clear();
    for (const auto& i : ifs) {
      DataInterface d;
      if (i.IsScalar()) {
        d.netdev = i.as<std::string>("");
      } else if (i.IsMap()) {
        HANGAR_RETURN_IF_ERROR(src_.CheckKeys(i, "a data interface", {"netdev", "hca"}));
        HANGAR_ASSIGN_OR_RETURN(auto netdev, src_.OptString(i, "netdev"));
        HANGAR_ASSIGN_OR_RETURN(auto hca, src_.OptString(i, "hca"));
        d.netdev = netdev.value_or("");
        d.hca = hca.value_or("");
      } else {
        return src_.Error(i, std::string("a data interface is a netdev name or a map, ") + example);
      }
      for (const std::string* name : {&d.netdev, &d.hca}) {
        const bool bad =
            name->size() > 64 || name->find_first_of(", =\t\n\"'") != std::string::npos;
        if (bad)
          return src_.Error(i,
                            "data interface name '" + *name + "' is not a device name, " + example);
      }
      if (d.netdev.empty() && d.hca.empty())
        return src_.Error(i, std::string("a data interface needs a netdev or an hca, ") + example);
      out->push_back(std::move(d));
    }
    return Status::Ok();
  }

  // management_address / data_address of a node entry: one IP address, or a range that expands
  // alongside the entry's name ("10.77.0.[11-26]" for "gpu-[01-16]").
  StatusOr<std::vector<std::string>> NodeAddresses(const YAML::Node& n, const char* key,
                                                   size_t nodes, const std::string& pattern) {
    HANGAR_ASSIGN_OR_RETURN(auto text, src_.OptString(n, key));
    if (!text) return std::vector<std::string>(nodes);
    auto list = ExpandNameRange(*text);
    if (!list.ok()) return src_.Error(n[key], std::string(key) + ": " + list.status().message());
    if (list->size() != nodes) {
      return src_.Error(
          n[key],
          std::string(key) + " '" + *text + "' gives " + std::to_string(list->size()) +
              " address(es) for the " + std::to_string(nodes) + " node(s) of '" + pattern +
              "'; give a range as long as the name's, e.g. 10.77.0.[11-26] for gpu-[01-16]");
    }
    for (const auto& a : *list) {
      if (!IsIpAddress(a)) {
        return src_.Error(n[key], std::string(key) + " '" + a +
                                      "' is not an IP address (e.g. 10.77.0.11 or fd00::11); "
                                      "the controller checks agents' connections against it");
      }
    }
    return list;
  }

  Status ParseNetworks(const YAML::Node& nw, ClusterFile* out) {
    HANGAR_RETURN_IF_ERROR(src_.CheckKeys(nw, "networks", {"management"}));
    HANGAR_ASSIGN_OR_RETURN(auto mgmt, src_.OptString(nw, "management"));
    if (mgmt) {
      if (mgmt->find('/') == std::string::npos ||
          !AddressInNetwork(mgmt->substr(0, mgmt->find('/')), *mgmt)) {
        return src_.Error(nw["management"],
                          "networks.management '" + *mgmt +
                              "' is not a CIDR block like 10.77.0.0/24 or fd00::/64");
      }
      out->management_network = *mgmt;
    }
    return Status::Ok();
  }

  // Each management address once, inside networks.management; data interfaces, where given,
  // one per rail.
  Status CheckNodeNetworks(const TopologyBuilder& builder, const std::string& management) {
    std::map<std::string, const NodeSpec*> by_address;
    for (const NodeSpec& s : builder.specs()) {
      const std::string where =
          src_.name() + ":" + std::to_string(s.source_line) + ": node '" + s.name + "'";
      const std::string& a = s.networks.management_address;
      if (!a.empty()) {
        if (!management.empty() && !AddressInNetwork(a, management)) {
          return Status::InvalidArgument(where + ": management_address " + a +
                                         " is outside networks.management " + management +
                                         "; give it the node's address on that network");
        }
        auto [it, fresh] = by_address.emplace(a, &s);
        if (!fresh) {
          return Status::InvalidArgument(where + ": management_address " + a + " is node '" +
                                         it->second->name + "''s too; each node has its own");
        }
      }
      const size_t ifs = s.networks.data_interfaces.size();
      if (ifs > 0 && s.rails > 0 && static_cast<size_t>(s.rails) != ifs) {
        return Status::InvalidArgument(where + ": rails is " + std::to_string(s.rails) +
                                       " but data_interfaces lists " + std::to_string(ifs) +
                                       "; give one data interface per rail");
      }
    }
    return Status::Ok();
  }

  Status AddNodeList(const YAML::Node& list, const NodeSpec& defaults, const std::string& spine,
                     const std::string& leaf, TopologyBuilder* builder) {
    if (!list.IsSequence() || list.size() == 0) {
      return src_.Error(list, "'nodes' must be a non-empty list of nodes");
    }
    for (const auto& n : list) {
      NodeSpec spec = defaults;
      HANGAR_RETURN_IF_ERROR(ApplyNodeFields(n, "a node", &spec));
      HANGAR_ASSIGN_OR_RETURN(std::string pattern, src_.String(n, "name"));
      auto names = ExpandNameRange(pattern);
      if (!names.ok()) return src_.Error(n["name"], names.status().message());
      if (spec.gpus > 0 && spec.gpu_model.empty()) {
        return src_.Error(
            n, "node '" + pattern + "' has GPUs but no gpu_model; set it here or in node_defaults");
      }
      if (spec.gpus > 0 && spec.gpu_memory_mib <= 0) {
        return src_.Error(
            n, "node '" + pattern + "' has GPUs but no gpu_memory (e.g. gpu_memory: 80Gi)");
      }
      if (spec.milli_cpu <= 0 || spec.memory_mib <= 0) {
        return src_.Error(
            n, "node '" + pattern + "' needs cpu and memory (e.g. cpu: 128, memory: 1Ti)");
      }
      if (spec.rails == 0 && !spec.networks.data_interfaces.empty()) {
        spec.rails = static_cast<int>(spec.networks.data_interfaces.size());
      }
      HANGAR_ASSIGN_OR_RETURN(auto mgmt,
                              NodeAddresses(n, "management_address", names->size(), pattern));
      HANGAR_ASSIGN_OR_RETURN(auto data, NodeAddresses(n, "data_address", names->size(), pattern));
      for (size_t k = 0; k < names->size(); ++k) {
        const std::string& name = (*names)[k];
        NodeSpec one = spec;
        one.name = name;
        one.networks.management_address = mgmt[k];
        one.networks.data_address = data[k];
        one.spine = spine;
        one.leaf = leaf;
        builder->AddNode(std::move(one));
      }
    }
    return Status::Ok();
  }

  Status AddFabric(const YAML::Node& fabric, const NodeSpec& defaults, TopologyBuilder* builder) {
    HANGAR_RETURN_IF_ERROR(src_.CheckKeys(fabric, "fabric", {"spines"}));
    // A missing key reads as an invalid node, whose IsSequence() throws: test it is there first.
    const YAML::Node spines = fabric["spines"];
    if (!spines || !spines.IsSequence() || spines.size() == 0) {
      return src_.Error(fabric, "fabric.spines must be a non-empty list");
    }
    for (const auto& spine : spines) {
      HANGAR_RETURN_IF_ERROR(src_.CheckKeys(spine, "a spine", {"name", "leaves"}));
      HANGAR_ASSIGN_OR_RETURN(std::string spine_name, src_.String(spine, "name"));
      const YAML::Node leaves = spine["leaves"];
      if (!leaves || !leaves.IsSequence() || leaves.size() == 0) {
        return src_.Error(spine, "spine '" + spine_name + "' needs a non-empty list of leaves");
      }
      for (const auto& leaf : leaves) {
        HANGAR_RETURN_IF_ERROR(src_.CheckKeys(leaf, "a leaf", {"name", "nodes"}));
        HANGAR_ASSIGN_OR_RETURN(std::string leaf_name, src_.String(leaf, "name"));
        if (!leaf["nodes"]) return src_.Error(leaf, "leaf '" + leaf_name + "' has no nodes");
        HANGAR_RETURN_IF_ERROR(
            AddNodeList(leaf["nodes"], defaults, spine_name, leaf_name, builder));
      }
    }
    return Status::Ok();
  }

  Status AddFatTree(const YAML::Node& ft, const NodeSpec& defaults, TopologyBuilder* builder) {
    HANGAR_RETURN_IF_ERROR(src_.CheckKeys(
        ft, "fat_tree",
        {"spines", "leaves_per_spine", "nodes_per_leaf", "racks_per_leaf", "node_prefix"}));
    HANGAR_ASSIGN_OR_RETURN(int64_t spines, src_.Int(ft, "spines", 1, 4096));
    HANGAR_ASSIGN_OR_RETURN(int64_t leaves, src_.Int(ft, "leaves_per_spine", 1, 4096));
    HANGAR_ASSIGN_OR_RETURN(int64_t nodes, src_.Int(ft, "nodes_per_leaf", 1, 4096));
    HANGAR_ASSIGN_OR_RETURN(auto racks, src_.OptInt(ft, "racks_per_leaf", 1, 4096));
    HANGAR_ASSIGN_OR_RETURN(auto prefix, src_.OptString(ft, "node_prefix"));
    if (spines * leaves * nodes > 1'000'000) return src_.Error(ft, "more than 1,000,000 nodes");
    if (defaults.milli_cpu <= 0 || defaults.memory_mib <= 0 ||
        (defaults.gpus > 0 && (defaults.gpu_model.empty() || defaults.gpu_memory_mib <= 0))) {
      return src_.Error(ft,
                        "fat_tree builds nodes from node_defaults; give it gpus, gpu_model, "
                        "gpu_memory, cpu and memory");
    }
    const int64_t total = spines * leaves * nodes;
    const int width = total > 9999 ? 5 : 4;
    const int64_t per_rack = racks ? (nodes + *racks - 1) / *racks : nodes;
    int64_t id = 0;
    char buf[96];
    for (int64_t s = 0; s < spines; ++s) {
      for (int64_t l = 0; l < leaves; ++l) {
        const int64_t leaf_id = s * leaves + l;
        for (int64_t k = 0; k < nodes; ++k, ++id) {
          NodeSpec one = defaults;
          if (one.rails == 0) one.rails = static_cast<int>(one.networks.data_interfaces.size());
          std::snprintf(buf, sizeof buf, "%s-%0*lld", prefix.value_or("node").c_str(), width,
                        static_cast<long long>(id));
          one.name = buf;
          one.spine = "spine-" + std::to_string(s);
          one.leaf = "leaf-" + std::to_string(leaf_id);
          if (racks)
            one.rack = "rack-" + std::to_string(leaf_id) + "-" + std::to_string(k / per_rack);
          builder->AddNode(std::move(one));
        }
      }
    }
    return Status::Ok();
  }

  // mig.fixed_layouts: NODES (a name or a range such as "gpu-[00-03]") -> the profiles each of
  // its GPUs holds, placed largest first by the placer's start rule.
  Status ParseMig(const YAML::Node& m, ClusterFile* out) {
    HANGAR_RETURN_IF_ERROR(src_.CheckKeys(m, "mig", {"fixed_layouts"}));
    const YAML::Node layouts = m["fixed_layouts"];
    if (!layouts) return Status::Ok();
    if (!layouts.IsMap())
      return src_.Error(layouts,
                        "fixed_layouts must map node names to lists of MIG profiles, e.g. {gpu-01: "
                        "[3g.40gb, 3g.40gb]}");
    const Topology& t = *out->topology;
    for (const auto& kv : layouts) {
      HANGAR_ASSIGN_OR_RETURN(auto names, ExpandNameRange(kv.first.as<std::string>("")));
      if (!kv.second.IsSequence() || kv.second.size() == 0) {
        return src_.Error(kv.second,
                          "fixed_layouts: give each node a non-empty list of MIG profiles, e.g. "
                          "[3g.40gb, 3g.40gb]");
      }
      for (const std::string& name : names) {
        auto n = t.FindNode(name);
        if (!n)
          return src_.Error(kv.first, "fixed_layouts: no node '" + name + "' in this cluster");
        const NodeInfo& node = t.nodes()[*n];
        if (node.num_gpus == 0 || !t.gpus()[node.first_gpu].mig) {
          return src_.Error(kv.first, "fixed_layouts: node '" + name +
                                          "' is not in MIG mode; set mig: true on it");
        }
        ClusterFile::FixedMigLayout fixed;
        std::vector<MigShape> shapes;
        const uint8_t part = t.gpus()[node.first_gpu].mig_part;
        for (const auto& p : kv.second) {
          const std::string profile = p.as<std::string>("");
          auto shape = MigShapeOn(part, profile);
          if (!shape) {
            return src_.Error(p, "fixed_layouts: '" + profile + "' is not a MIG profile of node '" +
                                     name + "' (a " + std::string(MigPartAt(part).name) +
                                     "); its profiles are " + KnownMigProfiles());
          }
          fixed.profiles.push_back(profile);
          shapes.push_back(*shape);
        }
        std::sort(shapes.rbegin(), shapes.rend());
        for (MigShape shape : shapes) {
          if (!fixed.layout.Add(shape, MigBestStart(fixed.layout.Mask(), shape))) {
            return src_.Error(kv.second,
                              "fixed_layouts: the profiles for node '" + name +
                                  "' do not fit on one GPU (8 memory slices, 7 compute slices)");
          }
        }
        out->mig_fixed_layouts[*n] = std::move(fixed);
      }
    }
    return Status::Ok();
  }

  Status ParseData(const YAML::Node& d, DataConfig* out) {
    HANGAR_RETURN_IF_ERROR(src_.CheckKeys(d, "data",
                                          {"network", "origin_readers", "chunk_size", "fanout",
                                           "origin_bandwidth", "peer_bandwidth", "file_roots"}));
    if (d["file_roots"])
      HANGAR_RETURN_IF_ERROR(
          ParseFolders(d["file_roots"], "data.file_roots", "/lustre", &out->file_roots));
    HANGAR_ASSIGN_OR_RETURN(auto network, src_.OptString(d, "network"));
    if (network) {
      if (network->find('/') == std::string::npos ||
          !AddressInNetwork(network->substr(0, network->find('/')), *network)) {
        return src_.Error(d["network"], "data.network '" + *network +
                                            "' is not a CIDR block like 10.20.0.0/16 or fd00::/8");
      }
      out->network = *network;
    }
    HANGAR_ASSIGN_OR_RETURN(auto readers, src_.OptInt(d, "origin_readers", 1, 10000));
    if (readers) out->origin_readers = static_cast<int>(*readers);
    HANGAR_ASSIGN_OR_RETURN(auto fanout, src_.OptInt(d, "fanout", 1, 64));
    if (fanout) out->fanout = static_cast<int>(*fanout);
    struct Size {
      const char* key;
      int64_t* to;
    };
    for (Size z :
         {Size{"chunk_size", &out->chunk_bytes}, Size{"origin_bandwidth", &out->origin_bytes_per_s},
          Size{"peer_bandwidth", &out->peer_bytes_per_s}}) {
      HANGAR_ASSIGN_OR_RETURN(auto text, src_.OptString(d, z.key));
      if (!text) continue;
      auto mib = ParseMemoryMiB(*text);
      if (!mib.ok() || *mib <= 0) {
        return src_.Error(d[z.key], std::string("data.") + z.key + ": '" + *text +
                                        "' is not a size like 8Mi or 1Gi" +
                                        (z.to == &out->chunk_bytes ? "" : " (bytes per second)"));
      }
      *z.to = *mib << 20;
    }
    return Status::Ok();
  }

  Status ParseContainers(const YAML::Node& c, ClusterFile* out) {
    HANGAR_RETURN_IF_ERROR(src_.CheckKeys(c, "containers", {"mounts_allowed"}));
    if (!c["mounts_allowed"]) return Status::Ok();
    return ParseFolders(c["mounts_allowed"], "mounts_allowed", "/data", &out->mounts_allowed);
  }

  // A list of absolute host folders (trailing '/' dropped); `example` shows one in the error.
  Status ParseFolders(const YAML::Node& list, const std::string& key, const std::string& example,
                      std::vector<std::string>* out) {
    if (!list.IsSequence())
      return src_.Error(list,
                        key + " must be a list of absolute host paths, e.g. [" + example + "]");
    for (const auto& p : list) {
      std::string path = p.IsScalar() ? p.as<std::string>("") : "";
      if (path.empty() || path.front() != '/') {
        return src_.Error(p, key + ": '" + path + "' is not an absolute path");
      }
      while (path.size() > 1 && path.back() == '/') path.pop_back();
      out->push_back(path);
    }
    return Status::Ok();
  }

  Status ParseBaselines(const YAML::Node& list, ClusterFile* out) {
    if (!list.IsSequence()) return src_.Error(list, "baselines must be a list");
    for (const auto& b : list) {
      HANGAR_RETURN_IF_ERROR(
          src_.CheckKeys(b, "a baseline", {"group", "driver", "cuda", "kernel", "ofed"}));
      ConfigBaseline base;
      HANGAR_ASSIGN_OR_RETURN(auto group, src_.OptString(b, "group"));
      HANGAR_ASSIGN_OR_RETURN(auto driver, src_.OptString(b, "driver"));
      HANGAR_ASSIGN_OR_RETURN(auto cuda, src_.OptString(b, "cuda"));
      HANGAR_ASSIGN_OR_RETURN(auto kernel, src_.OptString(b, "kernel"));
      HANGAR_ASSIGN_OR_RETURN(auto ofed, src_.OptString(b, "ofed"));
      base.group = group.value_or("");
      base.driver_version = driver.value_or("");
      base.cuda_version = cuda.value_or("");
      base.kernel_version = kernel.value_or("");
      base.ofed_version = ofed.value_or("");
      out->baselines.push_back(std::move(base));
    }
    return Status::Ok();
  }

  // One quantity of a gpu_models entry; 0 when absent.
  StatusOr<int64_t> PerGpu(const YAML::Node& m, const char* key, bool cpu) {
    HANGAR_ASSIGN_OR_RETURN(auto text, src_.OptString(m, key));
    if (!text) return int64_t{0};
    auto v = cpu ? ParseMilliCpu(*text) : ParseMemoryMiB(*text);
    if (!v.ok() || *v <= 0) {
      return src_.Error(m[key],
                        std::string(key) + ": '" + *text + "' is not " +
                            (cpu ? "a CPU count like 8 or 7500m" : "a size like 64Gi or 500Mi"));
    }
    return *v;
  }

  // Fills in the defaults a model entry leaves out: the smallest CPU (memory) per GPU over the
  // model's nodes, so the default fits on every one of them.
  Status DeriveDefaults(const Topology& topo, const YAML::Node& m, GpuModelLimits* l) {
    int64_t cpu = INT64_MAX, mem = INT64_MAX;
    for (const NodeInfo& n : topo.nodes()) {
      if (n.num_gpus == 0 || topo.models()[n.model] != l->model) continue;
      cpu = std::min(cpu, n.milli_cpu / n.num_gpus);
      mem = std::min(mem, n.memory_mib / n.num_gpus);
    }
    if (cpu == INT64_MAX) {
      std::string known;
      for (const auto& name : topo.models()) {
        if (!name.empty()) known += (known.empty() ? "" : ", ") + name;
      }
      return src_.Error(m, "gpu_models: '" + l->model +
                               "' is not the gpu_model of any node; the models are: " +
                               (known.empty() ? "none (no node has GPUs)" : known));
    }
    if (!l->default_milli_cpu_per_gpu) l->default_milli_cpu_per_gpu = cpu, l->cpu_derived = true;
    if (!l->default_memory_mib_per_gpu)
      l->default_memory_mib_per_gpu = mem, l->memory_derived = true;
    return Status::Ok();
  }

  Status ParseGpuModels(const YAML::Node& models, ClusterFile* out) {
    if (!models.IsMap()) {
      return src_.Error(models,
                        "gpu_models must be a map of model: {default_cpu_per_gpu, max_cpu_per_gpu, "
                        "default_memory_per_gpu, max_memory_per_gpu}");
    }
    for (const auto& kv : models) {
      GpuModelLimits l;
      l.model = kv.first.as<std::string>("");
      l.line = kv.first.Mark().line + 1;
      const YAML::Node& m = kv.second;
      if (m.IsNull()) {
        HANGAR_RETURN_IF_ERROR(DeriveDefaults(*out->topology, kv.first, &l));
        out->gpu_models.push_back(std::move(l));
        continue;
      }
      if (!m.IsMap())
        return src_.Error(
            m, "gpu_models." + l.model + " must be a map (or {} to derive the defaults)");
      HANGAR_RETURN_IF_ERROR(src_.CheckKeys(m, "gpu_models." + l.model,
                                            {"default_cpu_per_gpu", "max_cpu_per_gpu",
                                             "default_memory_per_gpu", "max_memory_per_gpu"}));
      HANGAR_ASSIGN_OR_RETURN(l.default_milli_cpu_per_gpu, PerGpu(m, "default_cpu_per_gpu", true));
      HANGAR_ASSIGN_OR_RETURN(l.max_milli_cpu_per_gpu, PerGpu(m, "max_cpu_per_gpu", true));
      HANGAR_ASSIGN_OR_RETURN(l.default_memory_mib_per_gpu,
                              PerGpu(m, "default_memory_per_gpu", false));
      HANGAR_ASSIGN_OR_RETURN(l.max_memory_mib_per_gpu, PerGpu(m, "max_memory_per_gpu", false));
      HANGAR_RETURN_IF_ERROR(DeriveDefaults(*out->topology, m, &l));
      if (l.max_milli_cpu_per_gpu && l.default_milli_cpu_per_gpu > l.max_milli_cpu_per_gpu) {
        return src_.Error(m, "gpu_models." + l.model + ": the default CPU per GPU (" +
                                 FormatCores(l.default_milli_cpu_per_gpu) +
                                 (l.cpu_derived ? ", derived from the nodes" : "") +
                                 ") is above max_cpu_per_gpu (" +
                                 FormatCores(l.max_milli_cpu_per_gpu) +
                                 "); raise the maximum or set a lower default_cpu_per_gpu");
      }
      if (l.max_memory_mib_per_gpu && l.default_memory_mib_per_gpu > l.max_memory_mib_per_gpu) {
        return src_.Error(m, "gpu_models." + l.model + ": the default memory per GPU (" +
                                 FormatMemoryMiB(l.default_memory_mib_per_gpu) +
                                 (l.memory_derived ? ", derived from the nodes" : "") +
                                 ") is above max_memory_per_gpu (" +
                                 FormatMemoryMiB(l.max_memory_mib_per_gpu) +
                                 "); raise the maximum or set a lower default_memory_per_gpu");
      }
      out->gpu_models.push_back(std::move(l));
    }
    return Status::Ok();
  }

  const YamlSource& src_;
};

}  // namespace

StatusOr<std::vector<std::string>> ExpandNameRange(std::string_view pattern) {
  auto open = pattern.find('[');
  if (open == std::string_view::npos) return std::vector<std::string>{std::string(pattern)};
  auto close = pattern.find(']', open);
  auto dash = pattern.find('-', open);
  auto bad = [&] {
    return Status::InvalidArgument("'" + std::string(pattern) +
                                   "' is not a node range; write it like gpu-[00-15]");
  };
  if (close == std::string_view::npos || dash == std::string_view::npos || dash > close)
    return bad();
  std::string_view lo_s = pattern.substr(open + 1, dash - open - 1);
  std::string_view hi_s = pattern.substr(dash + 1, close - dash - 1);
  int64_t lo = 0, hi = 0;
  if (std::from_chars(lo_s.data(), lo_s.data() + lo_s.size(), lo).ptr !=
          lo_s.data() + lo_s.size() ||
      std::from_chars(hi_s.data(), hi_s.data() + hi_s.size(), hi).ptr !=
          hi_s.data() + hi_s.size() ||
      lo_s.empty() || hi_s.empty() || hi < lo || hi - lo > 1'000'000) {
    return bad();
  }
  std::vector<std::string> out;
  const int width = static_cast<int>(lo_s.size());
  char buf[32];
  for (int64_t i = lo; i <= hi; ++i) {
    std::snprintf(buf, sizeof buf, "%0*lld", width, static_cast<long long>(i));
    out.push_back(std::string(pattern.substr(0, open)) + buf +
                  std::string(pattern.substr(close + 1)));
  }
  return out;
}

StatusOr<ClusterFile> ParseClusterYaml(std::string_view text, const std::string& source_name) {
  YamlSource src(source_name);
  HANGAR_ASSIGN_OR_RETURN(YAML::Node root, src.Parse(text));
  if (!root.IsMap()) return src.Error(root, "a cluster file is a map with 'name' and the nodes");
  // yaml-cpp throws where a check above missed a case (the type of a key that is not there):
  // that is a mistake in the file too, reported as one rather than ending the process.
  try {
    return ClusterParser(src).Parse(root);
  } catch (const YAML::Exception& e) {
    return Status::InvalidArgument(source_name + ": " + e.what() +
                                   "; see docs/cluster-format.md for the form");
  }
}

bool AddressInNetwork(const std::string& host, const std::string& cidr) {
  if (cidr.empty()) return true;
  const size_t slash = cidr.find('/');
  if (slash == std::string::npos) return false;
  const std::string net = cidr.substr(0, slash);
  int bits = -1;
  try {
    bits = std::stoi(cidr.substr(slash + 1));
  } catch (...) {
    return false;
  }
  unsigned char a[16] = {}, n[16] = {};
  int len = 0;
  if (inet_pton(AF_INET, net.c_str(), n) == 1) {
    len = 4;
    if (inet_pton(AF_INET, host.c_str(), a) != 1) return false;
  } else if (inet_pton(AF_INET6, net.c_str(), n) == 1) {
    len = 16;
    if (inet_pton(AF_INET6, host.c_str(), a) != 1) return false;
  } else {
    return false;
  }
  if (bits < 0 || bits > len * 8) return false;
  for (int i = 0; i < len; ++i) {
    const int b = std::clamp(bits - i * 8, 0, 8);
    const unsigned char mask = static_cast<unsigned char>(b == 0 ? 0 : 0xff << (8 - b));
    if ((a[i] & mask) != (n[i] & mask)) return false;
  }
  return true;
}

StatusOr<ClusterFile> LoadClusterFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return Status::NotFound(path + ": cannot open the cluster file; check the path");
  std::stringstream ss;
  ss << in.rdbuf();
  return ParseClusterYaml(ss.str(), path);
}

}  // namespace hangar::cluster
