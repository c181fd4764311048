#include "cluster/topology_discovered.h"

#include <gtest/gtest.h>

#include "cluster/cluster_yaml.h"

namespace hangar::cluster {
namespace {

// leaf-1: node-1..3, leaf-2: node-4..5, one spine block; 8 GPUs each, NVLink per node.
std::shared_ptr<const Topology> TwoLeaves(NvlinkLayout nvlink = NvlinkLayout::kNode) {
  TopologyBuilder b("lab");
  for (int i = 1; i <= 5; ++i) {
    NodeSpec s;
    s.name = "node-" + std::to_string(i);
    s.spine = "pod-a";
    s.leaf = i <= 3 ? "leaf-1" : "leaf-2";
    s.rack = i <= 3 ? "r1" : "r2";
    s.gpus = 8;
    s.gpu_model = "H100";
    s.gpu_memory_mib = 80 * 1024;
    s.nvlink = nvlink;
    b.AddNode(s);
  }
  auto t = std::move(b).Build();
  EXPECT_TRUE(t.ok());
  return *t;
}

DiscoveredPlace On(const std::string& node, const std::string& guid, const std::string& name,
                   const std::string& fabric = "") {
  return {node, guid, name, "mlx5_0/1", fabric};
}

TEST(TopologyDiscoveredTest, NamesTheNodeOnTheWrongLeafAndTheLeafItsSwitchBelongsTo) {
  auto t = TwoLeaves();
  const std::vector<DiscoveredPlace> places = {
      On("node-1", "000000000000000a", "sw-a"), On("node-2", "000000000000000a", "sw-a"),
      On("node-3", "000000000000000b", "sw-b"), On("node-4", "000000000000000b", "sw-b"),
      On("node-5", "000000000000000b", "sw-b")};
  const auto diff = DiffDiscovered(*t, places);
  ASSERT_EQ(diff.size(), 1u);
  EXPECT_EQ(diff[0].node, "node-3");
  EXPECT_EQ(diff[0].message,
            "node-3: declared on leaf-1, but its IB port mlx5_0/1 reports switch "
            "0x000000000000000b (sw-b), which leaf-2's other nodes report; move it under leaf-2 "
            "in cluster.yaml or fix its cabling");
  // Agreement: node-3 on leaf-2 (the file fixed), and a node that told nothing is not judged.
  std::vector<DiscoveredPlace> fixed = places;
  fixed[2] = On("node-3", "000000000000000a", "sw-a");
  fixed.push_back({"node-9", "0c", "", "", ""});  // not in cluster.yaml: left out
  EXPECT_TRUE(DiffDiscovered(*t, fixed).empty());
}

TEST(TopologyDiscoveredTest, ASwitchNoDeclaredLeafOwnsAndOneSwitchDeclaredAsTwoLeaves) {
  auto t = TwoLeaves();
  auto diff = DiffDiscovered(
      *t, {On("node-1", "0a", "sw-a"), On("node-2", "0a", "sw-a"), On("node-3", "0c", "sw-c")});
  ASSERT_EQ(diff.size(), 1u);
  EXPECT_NE(diff[0].message.find("no declared leaf is on that switch"), std::string::npos)
      << diff[0].message;
  diff = DiffDiscovered(*t, {On("node-1", "0a", "sw-a"), On("node-4", "0a", "sw-a")});
  ASSERT_EQ(diff.size(), 1u);
  EXPECT_EQ(diff[0].node, "node-4");
  EXPECT_NE(diff[0].message.find("one switch as two leaves"), std::string::npos) << diff[0].message;
}

TEST(TopologyDiscoveredTest, NvlinkCliquesAgainstDeclaredRacks) {
  auto t = TwoLeaves(NvlinkLayout::kRack);  // racks r1 (node-1..3) and r2 (node-4..5)
  const std::string u = "6f1c0e2a-0000-4000-8000-000000000001";
  auto diff = DiffDiscovered(*t, {On("node-1", "", "", u + "/1"), On("node-2", "", "", u + "/1"),
                                  On("node-3", "", "", u + "/2"), On("node-4", "", "", u + "/2"),
                                  On("node-5", "", "", u + "/2")});
  ASSERT_EQ(diff.size(), 1u);
  EXPECT_EQ(diff[0].node, "node-3");
  EXPECT_NE(diff[0].message.find("r2/nvlink's nodes report it"), std::string::npos)
      << diff[0].message;
}

TEST(TopologyDiscoveredTest, TheTreeGroupsNodesBySwitchAndKeepsTheUntoldWhereDeclared) {
  auto t = TwoLeaves();
  const auto tree = AssembleDiscovered(
      *t, {On("node-1", "0a", "sw-a"), On("node-2", "0a", "sw-a"), On("node-3", "0b", "sw-b"),
           On("node-4", "0b", "sw-b", "u/1"), On("node-5", "0b", "", "u/1")});
  ASSERT_EQ(tree.leaves.size(), 2u);
  EXPECT_EQ(tree.leaves[0].name, "sw-a");
  EXPECT_EQ(tree.leaves[0].nodes, (std::vector<std::string>{"node-1", "node-2"}));
  EXPECT_EQ(tree.leaves[1].name, "sw-b");
  EXPECT_EQ(tree.leaves[1].switch_guid, "0b");
  EXPECT_EQ(tree.leaves[1].spine, "pod-a");
  EXPECT_EQ(tree.leaves[1].nodes, (std::vector<std::string>{"node-3", "node-4", "node-5"}));
  ASSERT_EQ(tree.nvlink_domains.size(), 1u);
  EXPECT_EQ(tree.nvlink_domains[0].nodes, (std::vector<std::string>{"node-4", "node-5"}));
  EXPECT_TRUE(tree.unplaced.empty());
  const auto partial = AssembleDiscovered(*t, {On("node-1", "0a", "")});
  ASSERT_EQ(partial.leaves.size(), 2u);
  EXPECT_EQ(partial.leaves[0].name, "switch-0a");
  // node-2 and node-3 go where their leaf's node-1 was found; leaf-2 told nothing.
  EXPECT_EQ(partial.leaves[0].nodes, (std::vector<std::string>{"node-1", "node-2", "node-3"}));
  EXPECT_EQ(partial.unplaced, (std::vector<std::string>{"node-2", "node-3", "node-4", "node-5"}));
  EXPECT_EQ(partial.leaves[1].name, "leaf-2");
  auto yaml = FabricYaml(tree.AsFabric());
  ASSERT_TRUE(yaml.ok());
  EXPECT_NE(yaml->find("- name: \"sw-b\""), std::string::npos) << *yaml;
  // node-4 and node-5 share an NVLink clique: written as one rack with `nvlink: rack`.
  EXPECT_NE(yaml->find("{name: \"node-3\"}, {name: \"node-[4-5]\", rack: nvl-1, nvlink: rack}"),
            std::string::npos)
      << *yaml;
}

// The written cluster.yaml loads, and its NVLink domain is the clique the agents found.
TEST(TopologyDiscoveredTest, AWrittenClusterFileKeepsTheNvlinkCliquesAsRacks) {
  auto t = TwoLeaves();
  const auto tree = AssembleDiscovered(
      *t, {On("node-1", "0a", "sw-a"), On("node-2", "0a", "sw-a"), On("node-3", "0a", "sw-a"),
           On("node-4", "0b", "sw-b", "u/7"), On("node-5", "0b", "sw-b", "u/7")});
  auto yaml = FabricYaml(tree.AsFabric(),
                         "name: lab\nnode_defaults: {gpus: 8, gpu_model: H100, gpu_memory: 80Gi, "
                         "cpu: 64, memory: 512Gi}\nnodes: [{name: "
                         "\"node-[1-3]\"}, {name: \"node-[4-5]\", rack: r2, nvlink: node}]\n");
  ASSERT_TRUE(yaml.ok()) << yaml.status().message();
  auto loaded = ParseClusterYaml(*yaml, "discovered.yaml");
  ASSERT_TRUE(loaded.ok()) << loaded.status().message() << "\n" << *yaml;
  const Topology& found = *loaded->topology;
  const NvlinkDomainInfo* rack = nullptr;
  for (const auto& d : found.nvlink_domains()) {
    if (d.name == "nvl-1/nvlink") rack = &d;
  }
  ASSERT_NE(rack, nullptr) << *yaml;
  EXPECT_EQ(rack->end_node - rack->first_node, 2u);
  EXPECT_EQ(found.nodes()[rack->first_node].name, "node-4");
  EXPECT_TRUE(found.has_multi_node_nvlink());
}

TEST(TopologyDiscoveredTest, HcaLinksFromAnIbnetdiscoverDump) {
  const auto links = IbnetdiscoverHcaLinks(
      "Switch\t40 \"S-b8599f0300aa0001\"\t\t# \"MF0;leaf-a2:MQM8700/U1\" enhanced port 0 lid 3\n"
      "[2]\t\"H-0002c90300a1000f\"[1](2c90300a10010)\t\t# \"gpu-006 HCA-1\" lid 17 4xHDR\n"
      "[5]\t\"S-b8599f0300aa0004\"[2]\t\t# \"MF0;spine-a1:MQM8700/U1\" lid 6 4xHDR\n"
      "Ca\t1 \"H-0002c90300a1000f\"\t\t# \"gpu-006 HCA-1\"\n"
      "[1](2c90300a10010)\t\"S-b8599f0300aa0001\"[2]\t\t# lid 17 lmc 0 \"MF0;leaf-a2\" lid 3\n");
  ASSERT_EQ(links.size(), 1u);
  EXPECT_EQ(links[0].hca_guid, "0002c90300a1000f");
  EXPECT_EQ(links[0].hca_port, 1u);
  EXPECT_EQ(links[0].port_guid, "0002c90300a10010");
  EXPECT_EQ(links[0].switch_guid, "b8599f0300aa0001");
  EXPECT_EQ(links[0].switch_name, "leaf-a2");
  EXPECT_EQ(links[0].switch_port, 2u);
  EXPECT_EQ(NormalizeGuid("0002:c903:00a1:000E"), "0002c90300a1000e");
  EXPECT_EQ(NormalizeGuid("0x2c9"), "00000000000002c9");
  EXPECT_EQ(NormalizeGuid("not-a-guid"), "");
}

}  // namespace
}  // namespace hangar::cluster
