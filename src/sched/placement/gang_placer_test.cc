#include "sched/placement/gang_placer.h"

#include <gtest/gtest.h>

#include <map>
#include <set>

#include "sched/test_util.h"

namespace hangar::sched::placement {
namespace {

using cluster::ClusterUsage;
using cluster::Level;
using namespace sched::testing;

class PlacerTest : public ::testing::Test {
 protected:
  PlaceResult Place(ClusterUsage& u, const GangRequest& r,
                    const std::vector<uint8_t>* excluded = nullptr) {
    PlaceOptions o{scorer_.get(), nullptr, excluded, 1};
    return placer_.Place(u, r, o);
  }
  Reason Why(const ClusterUsage& u, const GangRequest& r) {
    PlaceOptions o{scorer_.get(), nullptr, nullptr, 1};
    return ExplainNotNow(u, r, o);
  }
  std::unique_ptr<NodeScorer> scorer_ = std::move(MakeScorer("hangar")).value();
  GangPlacer placer_;
};

TEST_F(PlacerTest, ExactFitTakesTheWholeNode) {
  auto t = Leaves(1, 2);
  ClusterUsage u(t);
  auto r = Place(u, Whole(*t, 1, 8));
  ASSERT_TRUE(r.placed);
  EXPECT_EQ(r.assignment.grants.size(), 8u);
  EXPECT_EQ(r.locality, Level::kNvlinkDomain);
  EXPECT_EQ(u.node(r.assignment.tasks[0].node).free_whole, 0);
  EXPECT_EQ(u.TotalFreeWholeGpus(), 8);
}

TEST_F(PlacerTest, OneGpuShortPlacesNothingAndSaysSo) {
  auto t = Leaves(1, 2);
  ClusterUsage u(t);
  ASSERT_TRUE(Place(u, Whole(*t, 1, 1)).placed);  // node 0 now has 7 free
  ASSERT_TRUE(Place(u, Whole(*t, 1, 8)).placed);  // node 1 full
  auto big = Whole(*t, 1, 8);
  const auto before = u.TotalFreeWholeGpus();
  auto r = Place(u, big);
  EXPECT_FALSE(r.placed);
  EXPECT_EQ(u.TotalFreeWholeGpus(), before);  // nothing half-placed
  Reason why = Why(u, big);
  EXPECT_EQ(why.rule, Rule::kNotNowNodeGpus);
  EXPECT_EQ(why.ToString(*t), "needs 8 free GPUs on one node; the emptiest node has 7");
}

TEST_F(PlacerTest, ModelMismatchIsNever) {
  auto t = Leaves(1, 2);
  auto req = Whole(*t, 1, 1, "", "A100-80GB");
  ClusterUsage u(t);
  EXPECT_FALSE(Place(u, req).placed);
  Reason never = CheckNever(*t, req);
  EXPECT_EQ(never.rule, Rule::kNeverModel);
  EXPECT_NE(never.ToString(*t).find("this cluster has: H100"), std::string::npos);
  EXPECT_EQ(CheckNever(*t, Whole(*t, 1, 9)).ToString(*t),
            "never: asks 9 GPUs per replica, largest node has 8");
  EXPECT_EQ(CheckNever(*t, Whole(*t, 3, 8)).rule, Rule::kNeverCluster);
  EXPECT_EQ(CheckNever(*t, Whole(*t, 2, 8)).rule, Rule::kNone);
}

// Takes `gpus` GPUs on node n directly, to set up a state.
void Occupy(ClusterUsage& u, uint32_t n, int gpus) {
  cluster::GangAssignment a;
  const auto& node = u.topology().nodes()[n];
  for (int i = 0; i < gpus; ++i)
    a.grants.push_back({node.first_gpu + i, 1000, node.gpu_memory_mib});
  a.tasks.push_back({n, 0, 0, 0, 0, 0, static_cast<uint32_t>(gpus)});
  ASSERT_TRUE(u.Allocate(a).ok());
}

TEST_F(PlacerTest, GangIsAllOrNothing) {
  auto t = Leaves(2, 2);  // 4 nodes
  ClusterUsage u(t);
  // 4 free GPUs on each node: a 4 x 8 gang cannot start even though 16 GPUs are free.
  for (uint32_t n = 0; n < 4; ++n) Occupy(u, n, 4);
  EXPECT_EQ(u.TotalFreeWholeGpus(), 16);
  auto gang = Whole(*t, 4, 8);
  EXPECT_FALSE(Place(u, gang).placed);
  EXPECT_EQ(u.TotalFreeWholeGpus(), 16);
  EXPECT_EQ(Why(u, gang).ToString(*t), "needs 8 free GPUs on one node; the emptiest node has 4");
  // 2 x 8 with one 8-GPU node free elsewhere: still nothing, and nothing half-placed.
  auto t2 = Leaves(1, 3);
  ClusterUsage u2(t2);
  Occupy(u2, 1, 1);
  Occupy(u2, 2, 1);
  EXPECT_FALSE(Place(u2, Whole(*t2, 2, 8)).placed);
  EXPECT_EQ(u2.TotalFreeWholeGpus(), 22);
  EXPECT_EQ(Why(u2, Whole(*t2, 2, 8)).ToString(*t2),
            "needs room for 2 replicas of 8 GPUs at once; only 1 fit now");
  // 4 x 4 fits, one per node, across both leaves.
  auto r = Place(u, Whole(*t, 4, 4));
  ASSERT_TRUE(r.placed);
  std::set<uint32_t> nodes;
  for (const auto& task : r.assignment.tasks) nodes.insert(task.node);
  EXPECT_EQ(nodes.size(), 4u);
  EXPECT_EQ(r.locality, Level::kSpine);
}

TEST_F(PlacerTest, PrefersTheSmallestDomain) {
  auto t = Leaves(2, 4);
  ClusterUsage u(t);
  // 2 x 4 GPUs goes on one node, not two.
  auto two = Place(u, Whole(*t, 2, 4));
  ASSERT_TRUE(two.placed);
  EXPECT_EQ(two.assignment.tasks[0].node, two.assignment.tasks[1].node);
  EXPECT_EQ(two.locality, Level::kNvlinkDomain);
  // 4 x 8 fits under one leaf: the other (empty) leaf is preferred over spreading.
  auto four = Place(u, Whole(*t, 4, 8));
  ASSERT_TRUE(four.placed);
  EXPECT_EQ(four.locality, Level::kLeaf);
  EXPECT_EQ(t->nodes()[four.assignment.tasks[0].node].leaf, 1u);
}

TEST_F(PlacerTest, RequiredLeafWaitsRatherThanSpread) {
  auto t = Leaves(2, 2);
  ClusterUsage u(t);
  auto req = Whole(*t, 2, 8, "leaf");
  // One node busy in each leaf: 16 GPUs free, but not under one leaf.
  Occupy(u, 0, 8);
  Occupy(u, 2, 8);
  EXPECT_FALSE(Place(u, req).placed);
  EXPECT_EQ(Why(u, req).ToString(*t), "needs 16 GPUs under one leaf; the emptiest leaf has 8 free");
  // Unconstrained, the same gang spreads over the two leaves.
  auto spread = Place(u, Whole(*t, 2, 8));
  ASSERT_TRUE(spread.placed);
  EXPECT_EQ(spread.locality, Level::kSpine);
  // On an empty leaf the constrained gang starts.
  ClusterUsage empty(t);
  Occupy(empty, 0, 8);
  auto r = Place(empty, req);
  ASSERT_TRUE(r.placed);
  EXPECT_EQ(r.locality, Level::kLeaf);
  EXPECT_EQ(t->nodes()[r.assignment.tasks[0].node].leaf, 1u);
}

TEST_F(PlacerTest, FractionalPackingSharesGpusWithinTheirMilliAndMemory) {
  auto t = Leaves(1, 2, 2);
  ClusterUsage u(t);
  // Four quarter-GPU tasks share one GPU instead of spreading over four.
  std::set<uint32_t> gpus;
  for (int i = 0; i < 4; ++i) {
    auto r = Place(u, Shared(*t, 250));
    ASSERT_TRUE(r.placed);
    gpus.insert(r.assignment.grants[0].gpu);
  }
  EXPECT_EQ(gpus.size(), 1u);
  EXPECT_EQ(u.TotalFreeWholeGpus(), 3);
  // A half GPU goes on a fresh GPU, then a quarter fills the gap next to it.
  auto half = Place(u, Shared(*t, 500));
  ASSERT_TRUE(half.placed);
  auto quarter = Place(u, Shared(*t, 250));
  ASSERT_TRUE(quarter.placed);
  EXPECT_EQ(quarter.assignment.grants[0].gpu, half.assignment.grants[0].gpu);
  // Memory binds too: 70Gi on a GPU with 80Gi - 8Gi - 8Gi used does not fit there.
  auto big_mem = Place(u, Shared(*t, 200, "70Gi"));
  ASSERT_TRUE(big_mem.placed);
  EXPECT_NE(big_mem.assignment.grants[0].gpu, half.assignment.grants[0].gpu);
  // Whole-GPU requests never take a shared GPU.
  auto whole = Place(u, Whole(*t, 1, 1));
  ASSERT_TRUE(whole.placed);
  EXPECT_EQ(u.gpu_free_milli(whole.assignment.grants[0].gpu), 0);
  EXPECT_EQ(whole.assignment.grants[0].milli, 1000);
}

TEST_F(PlacerTest, ExcludedNodesAreAvoided) {
  auto t = Leaves(1, 2);
  ClusterUsage u(t);
  std::vector<uint8_t> excluded = {1, 0};
  auto r = Place(u, Whole(*t, 1, 1), &excluded);
  ASSERT_TRUE(r.placed);
  EXPECT_EQ(r.assignment.tasks[0].node, 1u);
  excluded = {1, 1};
  EXPECT_FALSE(Place(u, Whole(*t, 1, 1), &excluded).placed);
}

TEST_F(PlacerTest, UnhealthyAndDegradedNodes) {
  auto t = Leaves(1, 3);
  ClusterUsage u(t);
  cluster::NodeCondition draining;
  draining.schedulable = false;
  u.SetNodeCondition(0, draining);
  cluster::NodeCondition degraded;
  degraded.gangs_allowed = false;
  u.SetNodeCondition(1, degraded);
  cluster::NodeCondition suspect;
  suspect.penalty = 1;
  u.SetNodeCondition(2, suspect);
  // A single task avoids the draining node and prefers the degraded (not suspect) one.
  auto one = Place(u, Whole(*t, 1, 2));
  ASSERT_TRUE(one.placed);
  EXPECT_EQ(one.assignment.tasks[0].node, 1u);
  // A gang may not use the degraded node; the suspect one is all that is left, so 2 x 8 fails.
  EXPECT_FALSE(Place(u, Whole(*t, 2, 8)).placed);
  auto gang = Place(u, Whole(*t, 1, 8));
  ASSERT_TRUE(gang.placed);
  EXPECT_EQ(gang.assignment.tasks[0].node, 2u);
}

// Suspect hardware is ranked last across the whole cluster, not only within a leaf: packing the
// fuller leaf does not win over health. It still takes work once nothing clean is left.
TEST_F(PlacerTest, SuspectNodeIsRankedLastAcrossLeaves) {
  auto t = Leaves(2, 2);
  ClusterUsage u(t);
  cluster::NodeCondition suspect;
  suspect.penalty = 1;
  u.SetNodeCondition(1, suspect);
  std::vector<uint32_t> order;
  for (int i = 0; i < 4; ++i) {
    auto r = Place(u, Whole(*t, 1, 8));
    ASSERT_TRUE(r.placed) << i;
    order.push_back(r.assignment.tasks[0].node);
  }
  EXPECT_EQ(order, (std::vector<uint32_t>{0, 2, 3, 1}));
}

// A gang prefers nodes of the best performance band: with node 0 validated in the slower band, a
// two-node gang takes leaf 1 whole rather than leaf 0 (first by order) with the slower node in it.
TEST_F(PlacerTest, GangPrefersTheBestPerformanceBand) {
  auto t = Leaves(2, 2);
  ClusterUsage u(t);
  cluster::NodeCondition slower;
  slower.band = 1;
  u.SetNodeCondition(0, slower);
  auto r = Place(u, Whole(*t, 2, 8));
  ASSERT_TRUE(r.placed);
  std::set<uint32_t> nodes;
  for (const auto& task : r.assignment.tasks) nodes.insert(task.node);
  EXPECT_EQ(nodes, (std::set<uint32_t>{2, 3}));
  EXPECT_EQ(r.locality, Level::kLeaf);
  // With only leaf 0 left, the gang uses the slower node rather than wait.
  auto again = Place(u, Whole(*t, 2, 8));
  ASSERT_TRUE(again.placed);
  nodes.clear();
  for (const auto& task : again.assignment.tasks) nodes.insert(task.node);
  EXPECT_EQ(nodes, (std::set<uint32_t>{0, 1}));
}

TEST_F(PlacerTest, BigGangFillsWholeLeavesFirst) {
  auto t = Leaves(4, 4);  // 16 nodes, 4 per leaf
  ClusterUsage u(t);
  ASSERT_TRUE(Place(u, Whole(*t, 1, 8)).placed);  // leaf 0 loses a node
  auto r = Place(u, Whole(*t, 8, 8));
  ASSERT_TRUE(r.placed);
  std::set<uint32_t> leaves;
  for (const auto& task : r.assignment.tasks) leaves.insert(t->nodes()[task.node].leaf);
  EXPECT_EQ(leaves.size(), 2u);  // two whole leaves, not three partial ones
  EXPECT_EQ(leaves.count(0), 0u);
}

TEST_F(PlacerTest, MultiNodeNvlinkDomain) {
  auto f =
      cluster::LoadClusterFile(std::string(HANGAR_SOURCE_DIR) + "/examples/clusters/nvl72-2.yaml");
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  auto t = f->topology;
  ClusterUsage u(t);
  auto r = Place(u, Whole(*t, 16, 4, "nvlink_domain"));  // 64 GPUs in one NVL72
  ASSERT_TRUE(r.placed);
  EXPECT_EQ(r.locality, Level::kNvlinkDomain);
  auto r2 = Place(u, Whole(*t, 16, 4, "nvlink_domain"));
  ASSERT_TRUE(r2.placed);
  EXPECT_FALSE(Place(u, Whole(*t, 4, 4, "nvlink_domain")).placed);  // 8 + 8 left, in two racks
  EXPECT_EQ(CheckNever(*t, Whole(*t, 19, 4, "nvlink_domain")).rule, Rule::kNeverDomain);
}

TEST_F(PlacerTest, MigSlices) {
  auto f =
      cluster::LoadClusterFile(std::string(HANGAR_SOURCE_DIR) + "/examples/clusters/lab-4.yaml");
  ASSERT_TRUE(f.ok());
  auto t = f->topology;
  ClusterUsage u(t);
  auto req = Gang(*t, "name: m\ntasks:\n  - mig: 3g.40gb\n");
  auto a = Place(u, req);
  auto b = Place(u, req);
  ASSERT_TRUE(a.placed && b.placed);
  EXPECT_EQ(a.assignment.grants[0].gpu, b.assignment.grants[0].gpu);  // 3 + 3 of 7 slices, 80Gi
  auto c = Place(u, req);
  ASSERT_TRUE(c.placed);
  EXPECT_NE(c.assignment.grants[0].gpu, a.assignment.grants[0].gpu);
  EXPECT_EQ(
      CheckNever(*t,
                 Gang(*t, "name: m\ntasks:\n  - mig: 3g.40gb\n    gpu_models: [H100-SXM-80GB]\n"))
          .rule,
      Rule::kNeverMig);
}

}  // namespace
}  // namespace hangar::sched::placement

namespace hangar::sched::placement {
namespace {

// max_per_node (sbatch's --nodes): the replicas go to distinct nodes even where one node has room
// for them all, in every search (one node, leaf, spine, cluster, include_nodes) and in explain.
TEST_F(PlacerTest, MaxPerNodePutsReplicasOnDistinctNodes) {
  auto t = Leaves(2, 2);  // 4 nodes of 8 GPUs
  for (bool required_leaf : {false, true}) {
    ClusterUsage u(t);
    auto req = Whole(*t, 2, 1);
    if (required_leaf) req.topology = {Level::kLeaf, true};
    auto packed = Place(u, req);
    ASSERT_TRUE(packed.placed);
    EXPECT_EQ(packed.assignment.tasks[0].node, packed.assignment.tasks[1].node);

    req.groups[0].max_per_node = 1;
    Fingerprint(&req);
    auto spread = Place(u, req);
    ASSERT_TRUE(spread.placed);
    EXPECT_NE(spread.assignment.tasks[0].node, spread.assignment.tasks[1].node);
    if (required_leaf) {
      EXPECT_EQ(spread.locality, Level::kLeaf);
    }
  }
  ClusterUsage u(t);
  auto four = Whole(*t, 4, 2);
  four.groups[0].max_per_node = 2;
  Fingerprint(&four);
  auto r = Place(u, four);
  ASSERT_TRUE(r.placed);
  std::map<uint32_t, int> per;
  for (const auto& task : r.assignment.tasks) per[task.node]++;
  EXPECT_EQ(per.size(), 2u);
  for (const auto& [node, n] : per) EXPECT_EQ(n, 2) << node;
}

TEST_F(PlacerTest, MaxPerNodeBeyondTheNodesIsNeverAndSaysWhy) {
  auto t = Leaves(1, 2);
  auto req = Whole(*t, 3, 1);
  EXPECT_EQ(CheckNever(*t, req).rule, Rule::kNone);
  req.groups[0].max_per_node = 1;
  Fingerprint(&req);
  const Reason never = CheckNever(*t, req);
  EXPECT_EQ(never.rule, Rule::kNeverPerNode);
  EXPECT_EQ(never.ToString(*t),
            "never: needs 3 replicas at most 1 per node (max_per_node; sbatch's --nodes), but only "
            "2 nodes in this cluster could hold one; ask for fewer nodes");
  ClusterUsage u(t);
  EXPECT_FALSE(Place(u, req).placed);
  // Not now: one node full, the other has room for all three but takes one.
  Occupy(u, 0, 8);
  auto two = Whole(*t, 2, 1);
  two.groups[0].max_per_node = 1;
  Fingerprint(&two);
  EXPECT_FALSE(Place(u, two).placed);
  const Reason why = Why(u, two);
  EXPECT_EQ(why.rule, Rule::kNotNowReplicas);
  EXPECT_EQ(why.have, 1);
}

}  // namespace
}  // namespace hangar::sched::placement
