#include "cluster/usage.h"

#include <gtest/gtest.h>

#include "cluster/cluster_yaml.h"

namespace hangar::cluster {
namespace {

std::shared_ptr<const Topology> TwoLeaves() {
  auto f = ParseClusterYaml(R"(
node_defaults: {gpus: 4, gpu_model: H100, gpu_memory: 80Gi, cpu: 64, memory: 512Gi}
fabric:
  spines:
    - name: s0
      leaves:
        - {name: l0, nodes: [{name: "a-[0-1]"}]}
        - {name: l1, nodes: [{name: "b-[0-1]"}]}
)",
                            "t.yaml");
  EXPECT_TRUE(f.ok()) << f.status().ToString();
  return f->topology;
}

GangAssignment OneTask(uint32_t node, std::vector<GpuGrant> grants, int64_t cpu = 1000) {
  GangAssignment a;
  a.grants = std::move(grants);
  a.tasks.push_back({node, 0, 0, cpu, 1024, 0, static_cast<uint32_t>(a.grants.size())});
  return a;
}

TEST(UsageTest, AggregatesFollowAllocations) {
  ClusterUsage u(TwoLeaves());
  EXPECT_EQ(u.TotalFreeWholeGpus(), 16);
  EXPECT_EQ(u.NodesWithFree(Level::kLeaf, 0, 4), 2);
  auto a = OneTask(0, {{0, 1000, 80 * 1024}, {1, 1000, 80 * 1024}, {2, 1000, 80 * 1024}});
  ASSERT_TRUE(u.Allocate(a).ok());
  EXPECT_EQ(u.node(0).free_whole, 1);
  EXPECT_EQ(u.node(0).free_cpu, 63000);
  EXPECT_EQ(u.domain(Level::kLeaf, 0).free_whole, 5);
  EXPECT_EQ(u.domain(Level::kLeaf, 0).max_node_free_whole, 4);
  EXPECT_EQ(u.NodesWithFree(Level::kLeaf, 0, 1), 1);
  EXPECT_EQ(u.WholeGpuCapacity(Level::kLeaf, 0, 2), 2);  // node a-1: two pairs; a-0: none
  EXPECT_EQ(u.WholeGpuCapacity(Level::kCluster, 0, 4), 3);
  EXPECT_EQ(u.AllocatedMilliGpu(), 3000);
  EXPECT_EQ(u.node(0).task_classes[3], 1);
  u.Release(a);
  EXPECT_EQ(u.TotalFreeWholeGpus(), 16);
  EXPECT_EQ(u.node(0).task_classes[3], 0);
}

TEST(UsageTest, SharedGpusAndMaxima) {
  ClusterUsage u(TwoLeaves());
  auto a = OneTask(2, {{8, 300, 10 * 1024}});
  ASSERT_TRUE(u.Allocate(a).ok());
  EXPECT_EQ(u.node(2).free_whole, 3);
  EXPECT_EQ(u.node(2).free_milli, 3700);
  EXPECT_EQ(u.node(2).max_gpu_free_milli, 1000);
  EXPECT_EQ(u.gpu_free_memory(8), 70 * 1024);
  EXPECT_EQ(u.node(2).task_classes[0], 1);
}

TEST(UsageTest, FailedAllocationChangesNothing) {
  ClusterUsage u(TwoLeaves());
  ASSERT_TRUE(u.Allocate(OneTask(0, {{0, 1000, 80 * 1024}})).ok());
  auto before_whole = u.TotalFreeWholeGpus();
  // GPU 0 is taken: the whole allocation is refused.
  auto clash = OneTask(0, {{1, 1000, 80 * 1024}, {0, 500, 1}});
  Status s = u.Allocate(clash);
  EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(u.TotalFreeWholeGpus(), before_whole);
  EXPECT_EQ(u.gpu_free_milli(1), 1000);
  // Too much CPU for the node.
  EXPECT_FALSE(u.Allocate(OneTask(1, {}, 65000)).ok());
  EXPECT_EQ(u.node(1).free_cpu, 64000);
}

TEST(UsageTest, UnschedulableNodesAndGpusLeaveTheAggregates) {
  ClusterUsage u(TwoLeaves());
  NodeCondition draining;
  draining.schedulable = false;
  u.SetNodeCondition(1, draining);
  EXPECT_EQ(u.domain(Level::kLeaf, 0).free_whole, 4);
  EXPECT_EQ(u.domain(Level::kLeaf, 0).schedulable_nodes, 1);
  u.SetGpuAvailable(0, false);
  EXPECT_EQ(u.node(0).free_whole, 3);
  EXPECT_EQ(u.domain(Level::kLeaf, 0).max_node_free_whole, 3);
  u.SetNodeCondition(1, NodeCondition{});
  u.SetGpuAvailable(0, true);
  EXPECT_EQ(u.domain(Level::kLeaf, 0).free_whole, 8);
  EXPECT_EQ(u.domain(Level::kCluster, 0).max_node_free_whole, 4);
}

TEST(UsageTest, StampsChangeWithTheNode) {
  ClusterUsage u(TwoLeaves());
  const uint64_t s0 = u.node_stamp(0), s1 = u.node_stamp(1);
  ASSERT_TRUE(u.Allocate(OneTask(0, {{0, 1000, 80 * 1024}})).ok());
  EXPECT_NE(u.node_stamp(0), s0);
  EXPECT_EQ(u.node_stamp(1), s1);
  ClusterUsage copy = u;
  EXPECT_EQ(copy.node_stamp(0), u.node_stamp(0));
}

}  // namespace
}  // namespace hangar::cluster

namespace hangar::cluster {
namespace {

TEST(UsageTest, GpusOnANodeWithoutCpuAreStranded) {
  ClusterUsage u(TwoLeaves());
  EXPECT_EQ(u.StrandedGpus(), 0);
  // A CPU-only task takes all but half a core of node 0: its 4 free GPUs can feed no task.
  GangAssignment cpu_hog;
  cpu_hog.tasks.push_back({0, 0, 0, 63'500, 1024, 0, 0});
  ASSERT_TRUE(u.Allocate(cpu_hog).ok());
  EXPECT_TRUE(StrandsGpus(u.node(0)));
  EXPECT_EQ(u.StrandedGpus(), 4);
  // Memory too: node 1 keeps its CPU but loses its memory.
  GangAssignment mem_hog;
  mem_hog.tasks.push_back({1, 0, 0, 1000, 512 * 1024 - 512, 0, 0});
  ASSERT_TRUE(u.Allocate(mem_hog).ok());
  EXPECT_EQ(u.StrandedGpus(), 8);
  u.Release(cpu_hog);
  EXPECT_EQ(u.StrandedGpus(), 4);
  u.SetNodeCondition(1, NodeCondition{.schedulable = false});  // a drained node strands nothing
  EXPECT_EQ(u.StrandedGpus(), 0);
}

}  // namespace
}  // namespace hangar::cluster
