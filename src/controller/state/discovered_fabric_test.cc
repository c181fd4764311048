#include "controller/state/discovered_fabric.h"

#include <gtest/gtest.h>

namespace hangar::controller {
namespace {

namespace pb = ::hangar::agent::v1;

// leaf-1: node-1..3, leaf-2: node-4..5.
std::shared_ptr<const cluster::Topology> TwoLeaves() {
  cluster::TopologyBuilder b("lab");
  for (int i = 1; i <= 5; ++i) {
    cluster::NodeSpec s;
    s.name = "node-" + std::to_string(i);
    s.leaf = i <= 3 ? "leaf-1" : "leaf-2";
    s.gpus = 8;
    s.gpu_model = "H100";
    s.gpu_memory_mib = 80 * 1024;
    b.AddNode(s);
  }
  return *std::move(b).Build();
}

// What an agent tells: one port before the one cabled to `guid` (a port the dump did not know),
// and its GPUs in NVLink fabric `clique` when one is given.
pb::DiscoveredTopology Report(const std::string& guid, const std::string& name, int clique = -1) {
  pb::DiscoveredTopology d;
  pb::DiscoveredIbPort* unknown = d.add_ib_ports();
  unknown->set_device("mlx5_0");
  unknown->set_port(1);
  pb::DiscoveredIbPort* p = d.add_ib_ports();
  p->set_device("mlx5_1");
  p->set_port(1);
  p->set_switch_guid(guid);
  p->set_switch_name(name);
  for (int i = 0; i < 8; ++i) {
    pb::DiscoveredGpu* g = d.add_gpus();
    g->set_index(static_cast<uint32_t>(i));
    g->set_fabric_state(clique >= 0 ? "completed" : "not_supported");
    if (clique >= 0) {
      g->set_fabric_cluster_uuid("6f1c0e2a-0000-4000-8000-000000000001");
      g->set_fabric_clique_id(static_cast<uint32_t>(clique));
    }
  }
  return d;
}

TEST(DiscoveredFabricTest, AnEventPerNodeWhoseVerdictIsNewOrChanged) {
  auto t = TwoLeaves();
  DiscoveredFabric f(*t);
  const std::string a = "0xb8599f0300cc000a", b = "0xb8599f0300cc000b";
  f.Observe(0, Report(a, "sw-a"));
  f.Observe(1, Report(a, "sw-a"));
  EXPECT_TRUE(f.TakeChanges().empty());
  f.Observe(2, Report(b, "sw-b"));  // node-3: no declared leaf has sw-b yet
  auto told = f.TakeChanges();
  ASSERT_EQ(told.size(), 1u);
  EXPECT_EQ(told[0].node, "node-3");
  EXPECT_NE(told[0].message.find("no declared leaf is on that switch"), std::string::npos);
  f.Observe(3, Report(b, "sw-b"));  // node-4 makes sw-b leaf-2's: the verdict changes
  told = f.TakeChanges();
  ASSERT_EQ(told.size(), 1u);
  EXPECT_EQ(told[0].message,
            "node-3: declared on leaf-1, but its IB port mlx5_1/1 reports switch "
            "0xb8599f0300cc000b (sw-b), which leaf-2's other nodes report; move it under leaf-2 "
            "in cluster.yaml or fix its cabling");
  f.Observe(4, Report(b, "sw-b"));
  EXPECT_TRUE(f.TakeChanges().empty());
  f.Observe(2, Report(b, "sw-b"));
  EXPECT_TRUE(f.TakeChanges().empty()) << "told once, not at every register";
  EXPECT_EQ(f.Diff().size(), 1u);
  EXPECT_EQ(f.Place(2).port, "mlx5_1/1");
  EXPECT_EQ(f.Place(2).switch_guid, "b8599f0300cc000b");
  // The node's mark (its condition in `hangar nodes` and on the dashboard) is the verdict.
  ASSERT_NE(f.DisagreementOf("node-3"), nullptr);
  EXPECT_EQ(*f.DisagreementOf("node-3"), told[0].message);
  EXPECT_EQ(f.DisagreementOf("node-4"), nullptr);
  // Fixed cabling: node-3 registers again on sw-a; nothing more to say.
  f.Observe(2, Report(a, "sw-a"));
  EXPECT_TRUE(f.TakeChanges().empty());
  EXPECT_TRUE(f.Diff().empty());
  EXPECT_EQ(f.DisagreementOf("node-3"), nullptr);  // the mark goes with it
}

// A storm of registrations costs one Diff per TakeChanges, whatever the number of reports in
// between: the verdicts come out the same as if each had been judged at once.
TEST(DiscoveredFabricTest, ReportsBetweenTwoTakesAreJudgedTogether) {
  auto t = TwoLeaves();
  DiscoveredFabric f(*t);
  const std::string a = "0xb8599f0300cc000a", b = "0xb8599f0300cc000b";
  for (uint32_t n : {2u, 3u, 0u, 4u, 1u}) f.Observe(n, Report(n == 0 || n == 1 ? a : b, "sw"));
  const auto told = f.TakeChanges();
  ASSERT_EQ(told.size(), 1u);
  EXPECT_EQ(told[0].node, "node-3");
  EXPECT_NE(told[0].message.find("which leaf-2's other nodes report"), std::string::npos);
  EXPECT_TRUE(f.TakeChanges().empty());
}

TEST(DiscoveredFabricTest, TheTreeAndTheReportsAsJson) {
  auto t = TwoLeaves();
  DiscoveredFabric f(*t);
  f.Observe(0, Report("0xb8599f0300cc000a", "sw-a", 1));
  f.Observe(3, Report("0xb8599f0300cc000b", "sw-b", 1));
  const nlohmann::json j = f.Json();
  EXPECT_EQ(j["reported"], 2);
  EXPECT_EQ(j["declared"], 5);
  EXPECT_EQ(j["nodes"]["node-4"]["ib_ports"][1]["switch_name"], "sw-b");
  const auto& leaves = j["tree"]["leaves"];
  ASSERT_EQ(leaves.size(), 2u);  // the nodes that told nothing go with their leaf's teller
  EXPECT_EQ(leaves[0]["name"], "sw-a");
  EXPECT_EQ(leaves[0]["nodes"], nlohmann::json({"node-1", "node-2", "node-3"}));
  EXPECT_EQ(leaves[1]["name"], "sw-b");
  EXPECT_EQ(leaves[1]["switch_guid"], "0xb8599f0300cc000b");
  EXPECT_EQ(leaves[1]["nodes"], nlohmann::json({"node-4", "node-5"}));
  ASSERT_EQ(j["tree"]["nvlink_domains"].size(), 1u);
  EXPECT_EQ(j["tree"]["nvlink_domains"][0]["nodes"], nlohmann::json({"node-1", "node-4"}));
  EXPECT_EQ(j["tree"]["unplaced"], nlohmann::json({"node-2", "node-3", "node-5"}));
}

}  // namespace
}  // namespace hangar::controller
