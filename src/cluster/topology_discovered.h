// The fabric as the agents found it on the hardware (docs/topology-discovery.md): each node's leaf
// switch, from the switch its first InfiniBand port with a known peer is cabled to, and its
// multi-node NVLink domain, from the fabric clique its GPUs report. AssembleDiscovered builds the
// tree; DiffDiscovered names every node whose declared place in cluster.yaml disagrees with it.
// Pure functions: the controller keeps the agents' reports (controller/state/discovered_fabric.h).
#pragma once

#include <string>
#include <vector>

#include "cluster/topology.h"
#include "cluster/topology_import.h"

namespace hangar::cluster {

// What one node's agent found of its place.
struct DiscoveredPlace {
  std::string node;
  std::string switch_guid;    // the leaf switch its port reports (16 hex digits); "" unknown
  std::string switch_name;    // that switch's name (from its description); "" unknown
  std::string port;           // the port that told ("mlx5_0/1")
  std::string nvlink_fabric;  // "CLUSTER_UUID/CLIQUE" of its GPUs' NVLink fabric; "" none
};

struct DiscoveredTree {
  struct Leaf {
    std::string name;         // the switch's name, else "switch-GUID"; a declared leaf's name
                              // when none of its nodes told a switch (guid "")
    std::string switch_guid;  // "" for such a leaf
    std::string spine;        // the declared spine block of most of its nodes
    std::vector<std::string> nodes;
  };
  struct NvlinkDomain {
    std::string fabric;  // "CLUSTER_UUID/CLIQUE"
    std::vector<std::string> nodes;
  };
  std::vector<Leaf> leaves;  // switches in the declared order of their first node
  std::vector<NvlinkDomain> nvlink_domains;
  // Nodes that told no switch: under the switch most of their declared leaf's nodes told, else
  // under their declared leaf.
  std::vector<std::string> unplaced;

  // As the importers' tree, for FabricYaml: leaves under their spine blocks.
  ImportedFabric AsFabric() const;
};

// `places` in any order; nodes not in `declared` are left out.
DiscoveredTree AssembleDiscovered(const Topology& declared,
                                  const std::vector<DiscoveredPlace>& places);

struct Disagreement {
  std::string node;
  std::string message;  // one sentence, starting with the node's name
};

// One finding per node whose declared leaf (or multi-node NVLink domain) disagrees with what
// the agents found. A declared leaf's switch is the one most of its nodes report (ties: the
// first in node order); a node reporting another is on the wrong leaf, and the sentence names the
// declared leaf whose nodes report its switch, if any. Nodes that told nothing are not judged.
std::vector<Disagreement> DiffDiscovered(const Topology& declared,
                                         const std::vector<DiscoveredPlace>& places);

}  // namespace hangar::cluster
