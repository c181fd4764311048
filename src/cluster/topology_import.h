// Topology from the formats fleets already have (docs/topology-import.md): Slurm's topology.conf,
// an `ibnetdiscover` dump, and a CSV of hosts and their switch per layer. Each importer reads the
// text into an ImportedFabric -- hosts under leaf switches under spine blocks, the tree
// cluster.yaml's `fabric:` declares -- which FabricYaml writes out and DiffFabric compares with a
// cluster.yaml.
//
// A layer above the spine blocks (core switches) joins every block, as the cluster does, and is
// not kept. Where the input is not a tree, the importer decides and says so in `notes`.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "cluster/topology.h"
#include "common/status.h"

namespace hangar::cluster {

struct ImportedFabric {
  struct Leaf {
    std::string name;
    std::vector<std::string> hosts;  // in the input's order
  };
  struct Spine {
    std::string name;
    std::vector<Leaf> leaves;
  };
  std::vector<Spine> spines;
  std::vector<std::string> notes;  // decisions the importer made, one sentence each
  // Multi-node NVLink domains found (an NVL72 rack's clique): host -> the domain's rack name.
  // FabricYaml gives such hosts `rack: NAME, nvlink: rack` (docs/cluster-format.md).
  std::map<std::string, std::string> nvlink_racks;

  size_t NumHosts() const;
  // Host -> {leaf, spine}.
  std::map<std::string, std::pair<std::string, std::string>> Placement() const;
};

// `format`: slurm, ibnetdiscover or csv. `source` names the input in errors ("topology.conf:12:
// ...").
StatusOr<ImportedFabric> ImportFabric(std::string_view format, std::string_view text,
                                      const std::string& source);
StatusOr<ImportedFabric> ImportSlurmTopology(std::string_view text, const std::string& source);
StatusOr<ImportedFabric> ImportIbnetdiscover(std::string_view text, const std::string& source);
StatusOr<ImportedFabric> ImportHostCsv(std::string_view text, const std::string& source);

// cluster.yaml's `fabric:` section for `f` (host names compressed into ranges where they run).
// With `cluster_yaml` (an existing cluster file's text), a whole cluster file: its other top-level
// keys as they are, and each node keeping the fields it was declared with there. Hosts the
// cluster file does not declare are listed in `missing` (they take node_defaults).
StatusOr<std::string> FabricYaml(const ImportedFabric& f, std::string_view cluster_yaml = {},
                                 std::vector<std::string>* missing = nullptr);

// Where `declared` (a cluster.yaml's topology) and `found` disagree, one sentence per finding: a
// node under another leaf or spine block (leaves and blocks are matched by the nodes they share,
// whatever their names), a node only one of them has. Empty: they agree.
std::vector<std::string> DiffFabric(const Topology& declared, const ImportedFabric& found);

// One HCA port of an ibnetdiscover dump and the switch port it is cabled to, as the switch
// blocks' port lines tell it. GUIDs are 16 lower-case hex digits.
struct IbHcaLink {
  std::string hca_guid;  // the HCA's node GUID
  uint32_t hca_port = 0;
  std::string port_guid;  // "" when the line does not give it
  std::string switch_guid;
  std::string switch_name;  // from its description ("MF0;leaf-01:MQM8700/U1" -> leaf-01)
  uint32_t switch_port = 0;
};
std::vector<IbHcaLink> IbnetdiscoverHcaLinks(std::string_view text);

// A GUID as 16 lower-case hex digits ("0x2C90300A1000B", "0002:c903:00a1:000b" ->
// "0002c90300a1000b"); "" when it is not one.
std::string NormalizeGuid(std::string_view text);

}  // namespace hangar::cluster
