#include "sim/goodput_spares.h"

#include <gtest/gtest.h>

namespace hangar::sim {
namespace {

// Two spines of two leaves of three 2-GPU nodes: node n is in leaf n / 3, spine n / 6.
std::shared_ptr<const cluster::Topology> Fabric() {
  cluster::TopologyBuilder b("t");
  for (int i = 0; i < 12; ++i) {
    cluster::NodeSpec n;
    n.name = "n" + std::to_string(i);
    n.leaf = "leaf-" + std::to_string(i / 3);
    n.spine = "spine-" + std::to_string(i / 6);
    n.gpus = 2;
    n.gpu_model = "H100";
    n.gpu_memory_mib = 80 * 1024;
    n.milli_cpu = 8000;
    n.memory_mib = 64 * 1024;
    b.AddNode(std::move(n));
  }
  return *std::move(b).Build();
}

TEST(PickReplacementTest, TheSmallestDomainAroundTheFailedNodeFirst) {
  auto topo = Fabric();
  job::TopologyConstraint none;
  auto only = [](std::vector<uint32_t> ok) {
    return [ok](uint32_t n) { return std::find(ok.begin(), ok.end(), n) != ok.end(); };
  };
  EXPECT_EQ(PickReplacement(*topo, 4, none, only({0, 5, 11})), 5u);  // its leaf
  EXPECT_EQ(PickReplacement(*topo, 4, none, only({2, 7})), 2u);      // its spine, before another
  EXPECT_EQ(PickReplacement(*topo, 4, none, only({11, 7})), 7u);     // the cluster, lowest first
  EXPECT_EQ(PickReplacement(*topo, 4, none, only({7, 4})),
            4u);  // the failed node, back from repair
  EXPECT_EQ(PickReplacement(*topo, 4, none, only({})), std::nullopt);
}

TEST(PickReplacementTest, ARequiredRuleIsKept) {
  auto topo = Fabric();
  auto only = [](std::vector<uint32_t> ok) {
    return [ok](uint32_t n) { return std::find(ok.begin(), ok.end(), n) != ok.end(); };
  };
  const job::TopologyConstraint leaf{cluster::Level::kLeaf, true};
  const job::TopologyConstraint spine{cluster::Level::kSpine, true};
  const job::TopologyConstraint preferred{cluster::Level::kLeaf, false};
  EXPECT_EQ(PickReplacement(*topo, 4, leaf, only({0, 8})), std::nullopt);
  EXPECT_EQ(PickReplacement(*topo, 4, spine, only({0, 8})), 0u);
  EXPECT_EQ(PickReplacement(*topo, 4, spine, only({8})), std::nullopt);
  EXPECT_EQ(PickReplacement(*topo, 4, preferred, only({8})), 8u);  // a preference may be given up
}

cluster::GangAssignment TwoTasks(const cluster::Topology& topo) {
  cluster::GangAssignment a;
  for (uint32_t node : {1u, 4u}) {
    cluster::TaskPlacement t;
    t.node = node;
    t.replica = static_cast<uint32_t>(a.tasks.size());
    t.first_grant = static_cast<uint32_t>(a.grants.size());
    for (int g = 0; g < 2; ++g) a.grants.push_back({topo.nodes()[node].first_gpu + g, 1000, 0});
    t.end_grant = static_cast<uint32_t>(a.grants.size());
    a.tasks.push_back(t);
  }
  return a;
}

TEST(GangEditTest, MovedTasksTakeTheSameGpuOrdinalsOnTheirNewNode) {
  auto topo = Fabric();
  const cluster::GangAssignment a = TwoTasks(*topo);
  const cluster::GangAssignment moved = MoveTasks(*topo, a, {{1, 9}});
  ASSERT_EQ(moved.tasks.size(), 2u);
  EXPECT_EQ(moved.tasks[0].node, 1u);
  EXPECT_EQ(moved.tasks[1].node, 9u);
  EXPECT_EQ(moved.tasks[1].replica, 1u);
  const auto grants = moved.GrantsOf(moved.tasks[1]);
  ASSERT_EQ(grants.size(), 2u);
  EXPECT_EQ(grants[0].gpu, topo->nodes()[9].first_gpu);
  EXPECT_EQ(grants[1].gpu, topo->nodes()[9].first_gpu + 1);

  const cluster::GangAssignment kept = WithoutTasks(a, {0});
  ASSERT_EQ(kept.tasks.size(), 1u);
  EXPECT_EQ(kept.tasks[0].node, 4u);
  EXPECT_EQ(kept.GrantsOf(kept.tasks[0])[0].gpu, topo->nodes()[4].first_gpu);
}

TEST(GangEditTest, ANodeTakesATaskOnlyWithItsGpusFree) {
  auto topo = Fabric();
  cluster::ClusterUsage usage(topo);
  const cluster::GangAssignment a = TwoTasks(*topo);
  EXPECT_TRUE(NodeTakesTask(usage, 9, a, 0));
  cluster::GangAssignment one_gpu;
  one_gpu.tasks.push_back({.node = 9, .first_grant = 0, .end_grant = 1});
  one_gpu.grants.push_back({topo->nodes()[9].first_gpu + 1, 1000, 0});
  ASSERT_TRUE(usage.Allocate(one_gpu).ok());
  EXPECT_FALSE(NodeTakesTask(usage, 9, a, 0));
  EXPECT_TRUE(NodeTakesTask(usage, 10, a, 0));
}

}  // namespace
}  // namespace hangar::sim
