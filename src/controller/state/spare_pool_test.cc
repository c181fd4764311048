#include "controller/state/spare_pool.h"

#include <gtest/gtest.h>

namespace hangar::controller {
namespace {

// Two spines of two leaves of three 8-GPU nodes: node n is in leaf n / 3, spine n / 6.
std::shared_ptr<const cluster::Topology> Fabric() {
  cluster::TopologyBuilder b("t");
  for (int i = 0; i < 12; ++i) {
    cluster::NodeSpec n;
    n.name = "n" + std::to_string(i);
    n.leaf = "leaf-" + std::to_string(i / 3);
    n.spine = "spine-" + std::to_string(i / 6);
    n.gpus = 8;
    n.gpu_model = "H100";
    n.gpu_memory_mib = 80 * 1024;
    n.milli_cpu = 64000;
    n.memory_mib = 512 * 1024;
    b.AddNode(std::move(n));
  }
  return *std::move(b).Build();
}

cluster::SparesConfig PerLeaf(uint32_t count) {
  cluster::SparesConfig c;
  c.per = cluster::Level::kLeaf;
  c.count = count;
  return c;
}

std::vector<uint32_t> Spares(const SparePool& p) {
  std::vector<uint32_t> out;
  for (uint32_t n = 0; n < 12; ++n) {
    if (p.IsSpare(n)) out.push_back(n);
  }
  return out;
}

TEST(SparePoolTest, ACountPerLeafTakesTheLastNodesOfEachLeaf) {
  auto topo = Fabric();
  SparePool pool(*topo, PerLeaf(1));
  EXPECT_TRUE(pool.enabled());
  EXPECT_EQ(Spares(pool), (std::vector<uint32_t>{2, 5, 8, 11}));
  cluster::SparesConfig spine;
  spine.per = cluster::Level::kSpine;
  spine.count = 2;
  EXPECT_EQ(Spares(SparePool(*topo, spine)), (std::vector<uint32_t>{4, 5, 10, 11}));
  cluster::SparesConfig named;
  named.nodes = {0, 7};
  EXPECT_EQ(Spares(SparePool(*topo, named)), (std::vector<uint32_t>{0, 7}));
  SparePool none(*topo, {});
  EXPECT_FALSE(none.enabled());
  EXPECT_TRUE(Spares(none).empty());
}

TEST(SparePoolTest, ASpareOfTheFailedNodesLeafFirstThenAFreeNode) {
  auto topo = Fabric();
  SparePool pool(*topo, PerLeaf(1));
  job::TopologyConstraint none;
  auto any = [](uint32_t) { return true; };
  auto nothing = [](uint32_t) { return false; };
  // Node 4 fails: leaf 1's spare (5), not a spare of another leaf.
  auto pick = pool.PickFor(4, none, any, any);
  ASSERT_TRUE(pick);
  EXPECT_EQ(pick->node, 5u);
  EXPECT_TRUE(pick->spare);
  // Leaf 1's spare does not fit: the spine's other leaf's spare (2) comes before any free node.
  pick = pool.PickFor(
      4, none, [](uint32_t n) { return n != 5; }, any);
  ASSERT_TRUE(pick);
  EXPECT_EQ(pick->node, 2u);
  EXPECT_TRUE(pick->spare);
  // No spare fits: a free node of the failed node's leaf.
  pick = pool.PickFor(4, none, nothing, [](uint32_t n) { return n != 4; });
  ASSERT_TRUE(pick);
  EXPECT_EQ(pick->node, 3u);
  EXPECT_FALSE(pick->spare);
  // A rule required within a leaf never looks beyond the failed node's leaf.
  job::TopologyConstraint leaf{cluster::Level::kLeaf, true};
  EXPECT_FALSE(pool.PickFor(
      4, leaf, [](uint32_t n) { return n != 5; }, nothing));
}

TEST(SparePoolTest, ATakenSpareLeavesItsLeafShortUntilAnIdleNodeRefillsIt) {
  auto topo = Fabric();
  SparePool pool(*topo, PerLeaf(1));
  EXPECT_TRUE(pool.RefillCandidates().empty());
  pool.Take(5);
  EXPECT_FALSE(pool.IsSpare(5));
  EXPECT_EQ(pool.count(), 3u);
  EXPECT_EQ(pool.missing(), 1u);
  // Leaf 1's other nodes, the highest-numbered first.
  EXPECT_EQ(pool.RefillCandidates(), (std::vector<uint32_t>{5, 4, 3}));
  EXPECT_FALSE(pool.Refill(0));  // leaf 0 has its count
  EXPECT_TRUE(pool.Refill(3));
  EXPECT_FALSE(pool.Refill(4));  // leaf 1 has its count again
  EXPECT_EQ(pool.missing(), 0u);
  EXPECT_EQ(Spares(pool), (std::vector<uint32_t>{2, 3, 8, 11}));
  // A named pool refills from its own nodes only.
  cluster::SparesConfig named;
  named.nodes = {0, 7};
  SparePool pool2(*topo, named);
  pool2.Take(7);
  EXPECT_EQ(pool2.RefillCandidates(), (std::vector<uint32_t>{7}));
  EXPECT_FALSE(pool2.Refill(6));
  EXPECT_TRUE(pool2.Refill(7));
}

TEST(SparePoolTest, ReplacementsAreKeptPerJobForExplain) {
  auto topo = Fabric();
  SparePool pool(*topo, PerLeaf(1));
  EXPECT_TRUE(pool.Json(7).is_null());
  pool.Record(7, {1, 4, 5, true, 1000, "node n4 draining: xid 79"});
  EXPECT_TRUE(pool.Waiting(7));
  nlohmann::json j = pool.Json(7);
  ASSERT_EQ(j["replacements"].size(), 1u);
  EXPECT_EQ(j["replacements"][0]["failed"], "n4");
  EXPECT_EQ(j["replacements"][0]["with"], "n5");
  EXPECT_EQ(j["replacements"][0]["spare"], true);
  EXPECT_EQ(j["replacements"][0]["attempt"], 1);
  EXPECT_EQ(j["waiting"], true);
  pool.Started(7);
  EXPECT_EQ(pool.Json(7)["waiting"], false);
  for (int i = 0; i < 15; ++i) pool.Record(7, {2, 5, 3, false, 2000 + i, "lost"});
  EXPECT_EQ(pool.Json(7)["replacements"].size(), SparePool::kKeptPerJob);
  pool.Sweep([](uint64_t job) { return job == 7; });
  EXPECT_TRUE(pool.Json(7).is_null());
  EXPECT_FALSE(pool.Waiting(7));
}

}  // namespace
}  // namespace hangar::controller
