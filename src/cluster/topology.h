// The cluster's shape: GPUs, nodes and the fabric tree above them. Immutable once built, shared
// read-only by every thread. Free capacity lives elsewhere (ClusterUsage), indexed by the dense
// ids defined here.
//
// Nodes are numbered in fabric order (spine, leaf, NVLink domain, then declaration order), so
// every domain at every level -- NVLink domain, leaf switch, spine block, the cluster -- is a
// contiguous range of node indices [first_node, end_node). Searches and aggregates rely on it.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "common/status.h"

namespace hangar::cluster {

using ModelId = uint16_t;
using ModelMask = uint64_t;  // bit i set: model i is allowed
inline constexpr ModelMask kAnyModel = ~ModelMask{0};
inline constexpr int kMaxModels = 64;
inline constexpr int kMaxGpusPerNode = 64;
inline constexpr int64_t kMilliPerGpu = 1000;
inline constexpr int kMigSlicesPerGpu = 7;

// Topology levels, smallest first. A placement's locality is the smallest level at which all of
// its GPUs share one domain.
enum class Level : uint8_t { kNvlinkDomain = 0, kNode = 1, kLeaf = 2, kSpine = 3, kCluster = 4 };
std::string_view LevelName(Level level);  // "nvlink_domain", "node", "leaf", "spine", "cluster"
std::optional<Level> ParseLevel(std::string_view name);

using Labels = std::vector<std::pair<std::string, std::string>>;  // sorted by key

struct GpuInfo {
  uint32_t node = 0;
  uint16_t index = 0;  // ordinal within its node (what CUDA_VISIBLE_DEVICES names)
  ModelId model = 0;
  int64_t memory_mib = 0;
  uint32_t nvlink_domain = 0;
  int16_t numa = -1;
  int16_t rail = -1;     // NIC rail this GPU is wired to, -1 when unknown
  bool mig = false;      // MIG mode: capacity is counted in slices, not milli-GPU
  uint8_t mig_part = 0;  // MIG mode: which part's profile names it has (mig_geometry.h)
};

// One rail's interface on the data network: the netdev tasks' sockets use
// (NCCL_SOCKET_IFNAME, GLOO_SOCKET_IFNAME) and the RDMA device (NCCL_IB_HCA), "" when none.
struct DataInterface {
  std::string netdev;
  std::string hca;
  bool operator==(const DataInterface&) const = default;
};

// Where a node sits on the management and data networks (cluster.yaml; empty: not declared).
struct NodeNetworks {
  std::string management_address;  // the only address its agent may reach the controller from
  std::string data_address;        // tasks' rendezvous (MASTER_ADDR) when set
  std::vector<DataInterface> data_interfaces;  // by rail
};

struct NodeInfo {
  std::string name;
  uint32_t first_gpu = 0;  // GPUs of node n are [first_gpu, first_gpu + num_gpus)
  uint16_t num_gpus = 0;
  ModelId model = 0;  // the model of its GPUs (a node's GPUs are all one model)
  int64_t gpu_memory_mib = 0;
  int64_t milli_cpu = 0;
  int64_t memory_mib = 0;
  uint32_t leaf = 0;
  uint32_t spine = 0;
  std::string rack;
  std::string group;  // the node group it was declared in (for expected config baselines)
  Labels labels;
  int source_line = 0;  // where cluster.yaml declared it, 0 when built in code
  NodeNetworks networks;
};

struct DomainInfo {
  std::string name;
  uint32_t parent = 0;      // index in the level above (unused for the cluster)
  uint32_t first_node = 0;  // contiguous node range
  uint32_t end_node = 0;
  uint32_t first_child = 0;  // contiguous range of children in the level below
  uint32_t end_child = 0;    // (leaves of a spine, spines of the cluster)
  uint32_t num_gpus = 0;
};

struct NvlinkDomainInfo {
  std::string name;
  uint32_t first_node = 0;  // nodes whose GPUs are (partly) in this domain
  uint32_t end_node = 0;
  uint32_t num_gpus = 0;
  bool multi_node = false;  // e.g. an NVL72 rack
};

class Topology {
 public:
  const std::string& name() const { return name_; }
  const std::vector<GpuInfo>& gpus() const { return gpus_; }
  const std::vector<NodeInfo>& nodes() const { return nodes_; }
  const std::vector<DomainInfo>& leaves() const { return leaves_; }
  const std::vector<DomainInfo>& spines() const { return spines_; }
  const DomainInfo& cluster() const { return cluster_; }
  const std::vector<NvlinkDomainInfo>& nvlink_domains() const { return nvlink_domains_; }
  const std::vector<std::string>& models() const { return models_; }
  bool has_multi_node_nvlink() const { return has_multi_node_nvlink_; }
  bool has_mig() const { return has_mig_; }  // some GPU is in MIG mode
  int max_gpus_per_node() const { return max_gpus_per_node_; }
  int64_t max_node_milli_cpu() const { return max_node_milli_cpu_; }
  int64_t total_gpus() const { return static_cast<int64_t>(gpus_.size()); }

  std::optional<uint32_t> FindNode(std::string_view name) const;
  std::optional<ModelId> FindModel(std::string_view name) const;
  // The mask of models whose name is in `names`; an empty list means any model. Unknown names are
  // returned in `unknown` (a model not in this cluster simply matches no node).
  ModelMask MaskFor(const std::vector<std::string>& names,
                    std::vector<std::string>* unknown = nullptr) const;
  std::string MaskToString(ModelMask mask) const;

  // The domain at `level` that contains node n (for kNvlinkDomain: its first GPU's domain).
  uint32_t DomainOf(uint32_t node, Level level) const;
  // Node range and name of domain d at `level`.
  std::pair<uint32_t, uint32_t> NodeRange(Level level, uint32_t d) const;
  std::string DomainName(Level level, uint32_t d) const;
  uint32_t NumDomains(Level level) const;
  // True when node n has a label key=value.
  bool HasLabel(uint32_t node, std::string_view key, std::string_view value) const;

 private:
  friend class TopologyBuilder;
  std::string name_;
  std::vector<GpuInfo> gpus_;
  std::vector<NodeInfo> nodes_;
  std::vector<DomainInfo> leaves_;
  std::vector<DomainInfo> spines_;
  DomainInfo cluster_;
  std::vector<NvlinkDomainInfo> nvlink_domains_;
  std::vector<std::string> models_;
  std::unordered_map<std::string, uint32_t> node_index_;
  bool has_multi_node_nvlink_ = false;
  bool has_mig_ = false;
  int max_gpus_per_node_ = 0;
  int64_t max_node_milli_cpu_ = 0;
};

// How a node's GPUs are joined by NVLink.
enum class NvlinkLayout : uint8_t {
  kNode,   // one NVSwitch domain per node (HGX 8-GPU)
  kNone,   // no NVLink: each GPU is its own domain (PCIe cards)
  kPairs,  // bridged pairs 0-1, 2-3, ...
  kRack,   // one multi-node domain per rack within a leaf (GB200 NVL72)
};

struct NodeSpec {
  std::string name;
  std::string spine = "spine-0";
  std::string leaf = "leaf-0";
  std::string rack;
  std::string group;
  int gpus = 0;
  std::string gpu_model;
  int64_t gpu_memory_mib = 0;
  int64_t milli_cpu = 0;
  int64_t memory_mib = 0;
  NvlinkLayout nvlink = NvlinkLayout::kNode;
  bool mig = false;
  int numa_nodes = 1;  // GPUs are split evenly over this many NUMA nodes
  int rails = 0;       // NIC rails; GPU i is wired to rail i % rails when > 0
  Labels labels;
  NodeNetworks networks;
  int source_line = 0;
};

// Builds a Topology from node specs. Nodes keep declaration order within a leaf; leaves and
// spines are ordered by first appearance.
class TopologyBuilder {
 public:
  explicit TopologyBuilder(std::string cluster_name) : name_(std::move(cluster_name)) {}
  void AddNode(NodeSpec spec) { specs_.push_back(std::move(spec)); }
  size_t size() const { return specs_.size(); }
  const std::vector<NodeSpec>& specs() const { return specs_; }
  // Fails on duplicate node names, a leaf under two spines, zero-GPU nodes with a model, more
  // than kMaxModels models or kMaxGpusPerNode GPUs on a node.
  StatusOr<std::shared_ptr<const Topology>> Build() &&;

 private:
  std::string name_;
  std::vector<NodeSpec> specs_;
};

}  // namespace hangar::cluster
