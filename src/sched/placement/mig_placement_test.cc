// MIG placement: the placer keeps the GPU's and the node's largest shapes possible, and the
// chosen start slice travels in the grant.
#include <gtest/gtest.h>

#include "cluster/mig_geometry.h"
#include "sched/placement/gang_placer.h"
#include "sched/placement/node_fit.h"
#include "sched/test_util.h"

namespace hangar::sched::placement {
namespace {

using cluster::ClusterUsage;
using cluster::MigShape;
using namespace sched::testing;

class MigPlacementTest : public ::testing::Test {
 protected:
  PlaceResult Place(ClusterUsage& u, const std::string& profile) {
    PlaceOptions o{scorer_.get(), nullptr, nullptr, 1};
    return placer_.Place(u, Gang(u.topology(), "name: m\ntasks:\n  - mig: " + profile + "\n"), o);
  }
  static std::shared_ptr<const cluster::Topology> Node(int gpus, const std::string& memory) {
    return Cluster("nodes:\n  - {name: m0, gpus: " + std::to_string(gpus) +
                   ", gpu_model: H, gpu_memory: " + memory +
                   ", cpu: 64, memory: 512Gi, mig: true}\n");
  }
  std::unique_ptr<NodeScorer> scorer_ = std::move(MakeScorer("hangar")).value();
  GangPlacer placer_;
};

TEST_F(MigPlacementTest, StartSliceTravelsInTheGrant) {
  auto t = Node(1, "141Gi");
  ClusterUsage u(t);
  auto r = Place(u, "3g.71gb");
  ASSERT_TRUE(r.placed);
  const cluster::GpuGrant& g = r.assignment.grants[0];
  EXPECT_EQ(g.mig_shape, static_cast<uint8_t>(MigShape::k3g));
  EXPECT_EQ(g.mig_start, 4);  // not 0: the 4g's only home stays free
  EXPECT_EQ(g.milli, 3);
  EXPECT_EQ(u.gpu_mig_taken(0), 0xf0);
  ASSERT_TRUE(Place(u, "4g.71gb").placed);  // 3g + 4g fill the GPU
  EXPECT_FALSE(Place(u, "1g.18gb").placed);
  EXPECT_FALSE(Place(u, "3g.40gb").placed);  // an H100 name on an H200: never
}

TEST_F(MigPlacementTest, SmallInstancesLeaveThe4gAnd3gPossible) {
  auto t = Node(1, "80Gi");
  ClusterUsage u(t);
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(Place(u, "1g.10gb").placed);
  // Three 1g took slices 4-6 (packing from the top), so the 4g still has slices 0-3.
  EXPECT_EQ(u.gpu_mig_taken(0), 0b0111'0000);
  ASSERT_TRUE(Place(u, "4g.40gb").placed);
  EXPECT_EQ(u.gpu_mig_taken(0), 0b0111'1111);
}

TEST_F(MigPlacementTest, A2gKeepsA3gPossible) {
  auto t = Node(1, "80Gi");
  ClusterUsage u(t);
  auto r = Place(u, "2g.20gb");
  ASSERT_TRUE(r.placed);
  EXPECT_EQ(r.assignment.grants[0].mig_start, 4);  // at 0 or 2 it would leave no 3g or 4g home
  ASSERT_TRUE(Place(u, "1g.20gb").placed);         // double-memory 1g: slices 6-7
  EXPECT_EQ(u.gpu_mig_taken(0), 0xf0);
  ASSERT_TRUE(Place(u, "3g.40gb").placed);  // at 0
}

TEST_F(MigPlacementTest, CutGpusBeforeEmptyOnes) {
  auto t = Node(3, "80Gi");
  ClusterUsage u(t);
  auto a = Place(u, "3g.40gb");
  ASSERT_TRUE(a.placed);
  // A 1g goes next to the 3g (on GPU 0's slices 0-3), not on an empty GPU that could take a 7g.
  auto b = Place(u, "1g.10gb");
  ASSERT_TRUE(b.placed);
  EXPECT_EQ(b.assignment.grants[0].gpu, a.assignment.grants[0].gpu);
  ASSERT_TRUE(Place(u, "7g.80gb").placed);
  ASSERT_TRUE(Place(u, "7g.80gb").placed);
  EXPECT_FALSE(Place(u, "7g.80gb").placed);
}

TEST_F(MigPlacementTest, NodeAggregateAnswersByShape) {
  auto t = Node(1, "80Gi");
  ClusterUsage u(t);
  ASSERT_TRUE(Place(u, "3g.40gb").placed);
  ASSERT_TRUE(Place(u, "3g.40gb").placed);
  // 1 compute slice is free but no memory slice: nothing fits, and the node says so at once.
  EXPECT_EQ(u.gpu_free_milli(0), 1);
  EXPECT_EQ(u.node(0).mig_shapes, 0);
  auto req = Gang(*t, "name: m\ntasks:\n  - mig: 1g.10gb\n");
  EXPECT_EQ(CheckNode(u, 0, req.groups[0], {}), FitFailure::kMig);
}

TEST_F(MigPlacementTest, StaticCapacityCountsInstances) {
  auto t = Node(2, "80Gi");
  auto cap = [&](const std::string& p) {
    return StaticReplicaCapacity(*t, 0,
                                 Gang(*t, "name: m\ntasks:\n  - mig: " + p + "\n").groups[0]);
  };
  EXPECT_EQ(cap("1g.10gb"), 14);
  EXPECT_EQ(cap("1g.20gb"), 8);
  EXPECT_EQ(cap("2g.20gb"), 6);
  EXPECT_EQ(cap("3g.40gb"), 4);
  EXPECT_EQ(cap("4g.40gb"), 2);
  EXPECT_EQ(cap("7g.80gb"), 2);
  EXPECT_EQ(cap("1g.18gb"), 0);  // no such profile on this part
}

}  // namespace
}  // namespace hangar::sched::placement
