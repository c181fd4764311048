// Queue-driven MIG reshaping: which GPUs a cycle re-cuts for MIG jobs that found no instance, and
// that it never touches an instance in use, a fixed layout or a GPU already being re-cut.
#include "sched/mig_reshape.h"

#include <gtest/gtest.h>

#include "cluster/mig_geometry.h"
#include "sched/scheduler.h"
#include "sched/test_util.h"

namespace hangar::sched {
namespace {

using cluster::ClusterUsage;
using cluster::MigLayout;
using cluster::MigShape;
using namespace sched::testing;

std::shared_ptr<const cluster::Topology> H100Node(int gpus) {
  return Cluster("nodes:\n  - {name: m0, gpus: " + std::to_string(gpus) +
                 ", gpu_model: H, gpu_memory: 80Gi, cpu: 64, memory: 512Gi, mig: true}\n");
}

MigLayout Layout(std::initializer_list<std::pair<MigShape, int>> instances) {
  MigLayout l;
  for (auto [shape, start] : instances) EXPECT_TRUE(l.Add(shape, start));
  return l;
}

MigLayout SevenOnes() {
  MigLayout l;
  for (int s = 0; s < 7; ++s) l.Add(MigShape::k1g, s);
  return l;
}

class MigReshapeTest : public ::testing::Test {
 protected:
  Decisions Cycle(const ClusterUsage& u, const std::vector<std::string>& profiles) {
    requests_.clear();
    requests_.reserve(profiles.size());
    std::vector<PendingJob> pending;
    for (size_t i = 0; i < profiles.size(); ++i) {
      requests_.push_back(Gang(u.topology(), "name: j\ntasks:\n  - mig: " + profiles[i] + "\n"));
    }
    for (size_t i = 0; i < profiles.size(); ++i) {
      PendingJob p;
      p.id = i + 1;
      p.request = &requests_[i];
      p.seq = i + 1;
      pending.push_back(p);
    }
    Snapshot snap;
    snap.usage = &u;
    snap.pending = pending;
    return sched_->Cycle(snap, 0);
  }
  // Runs a 1g task in GPU g's instance at `start`.
  static void Busy(ClusterUsage& u, uint32_t g, MigShape shape, int start) {
    cluster::GangAssignment a;
    a.tasks.push_back({u.topology().gpus()[g].node, 0, 0, 0, 0, 0, 1});
    a.grants.push_back({g, cluster::ShapeInfo(shape).compute_slices, 0, static_cast<int8_t>(start),
                        static_cast<uint8_t>(shape)});
    ASSERT_TRUE(u.Allocate(a).ok());
  }
  std::vector<GangRequest> requests_;
  std::unique_ptr<Scheduler> sched_ = std::move(Scheduler::Create({})).value();
};

TEST(MigLayoutTest, AddRefusesOverlapsAndStartsTheShapeMayNotUse) {
  for (int shape = 0; shape < cluster::kMigShapes; ++shape) {
    const auto k = static_cast<MigShape>(shape);
    for (int start = 0; start < cluster::kMigMemorySlices; ++start) {
      MigLayout l;
      const bool allowed = cluster::ShapeInfo(k).starts >> start & 1;
      EXPECT_EQ(l.Add(k, start), allowed) << "shape " << shape << " at " << start;
      EXPECT_EQ(l.Has(k, start), allowed);
      EXPECT_EQ(l.Mask(), allowed ? cluster::MigPlacementMask(k, start) : 0);
    }
  }
  MigLayout l = Layout({{MigShape::k3g, 4}});
  EXPECT_FALSE(l.Add(MigShape::k1g, 5));  // inside the 3g
  EXPECT_TRUE(l.Add(MigShape::k2g, 2));
  EXPECT_EQ(l.StartsOverlapping(0b0001'1000), 0b0001'0100);  // slices 3-4: the 2g@2 and the 3g@4
  EXPECT_TRUE(l.Remove(4));
  EXPECT_FALSE(l.Remove(4));
  EXPECT_EQ(cluster::MigLayoutText(l, cluster::MigPartFor(81920)), "2g.20gb@2");
}

TEST_F(MigReshapeTest, AKnownLayoutTakesTasksOnlyIntoItsInstances) {
  auto t = H100Node(1);
  ClusterUsage u(t);
  u.SetMigLayout(0, Layout({{MigShape::k3g, 0}, {MigShape::k3g, 4}}));
  Decisions d = Cycle(u, {"3g.40gb", "1g.10gb"});
  ASSERT_EQ(d.placements.size(), 1u);  // the 3g into an instance; no 1g instance exists
  EXPECT_EQ(d.placements[0].job, 1u);
  EXPECT_EQ(d.placements[0].assignment.grants[0].mig_start, 0);  // the lowest free instance
  // A grant outside the layout is refused by the usage itself.
  cluster::GangAssignment a;
  a.tasks.push_back({0, 0, 0, 0, 0, 0, 1});
  a.grants.push_back({0, 1, 0, 6, static_cast<uint8_t>(MigShape::k1g)});
  const Status s = u.Allocate(a);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("no MIG instance"), std::string::npos) << s.message();
}

TEST_F(MigReshapeTest, AnEmptyLayoutIsCutForTheQueue) {
  auto t = H100Node(1);
  ClusterUsage u(t);
  u.SetMigLayout(0, MigLayout());
  Decisions d = Cycle(u, {"3g.40gb", "1g.10gb", "1g.10gb"});
  EXPECT_TRUE(d.placements.empty());
  ASSERT_EQ(d.mig_reshapes.size(), 1u);
  const MigReshapePlan& p = d.mig_reshapes[0];
  EXPECT_EQ(p.gpu, 0u);
  EXPECT_EQ(p.for_job, 1u);
  EXPECT_EQ(p.before, MigLayout());
  // The 3g at 4 keeps the 4g's home; the 1g instances then pack from the top of what is left.
  EXPECT_EQ(cluster::MigLayoutText(p.after, t->gpus()[0].mig_part),
            "1g.10gb@2,1g.10gb@3,3g.40gb@4");
  EXPECT_EQ(MigStartsToCreate(p.before, p.after), 0b0001'1100);
  EXPECT_EQ(MigStartsToDestroy(p.before, p.after), 0);
}

TEST_F(MigReshapeTest, OnlyIdleInstancesAreDestroyed) {
  auto t = H100Node(2);
  ClusterUsage u(t);
  u.SetMigLayout(0, SevenOnes());
  u.SetMigLayout(1, SevenOnes());
  Busy(u, 0, MigShape::k1g, 0);  // GPU 0: busy at both ends, so no 3g can be cut there
  Busy(u, 0, MigShape::k1g, 6);
  Busy(u, 1, MigShape::k1g, 1);  // GPU 1: busy at 1, so the 3g goes to 4-7
  Decisions d = Cycle(u, {"3g.40gb"});
  ASSERT_EQ(d.mig_reshapes.size(), 1u);
  const MigReshapePlan& p = d.mig_reshapes[0];
  EXPECT_EQ(p.gpu, 1u);
  EXPECT_EQ(MigStartsToDestroy(p.before, p.after), 0b0111'0000);  // the idle 1g at 4, 5 and 6
  EXPECT_EQ(MigStartsToCreate(p.before, p.after), 0b0001'0000);
  EXPECT_TRUE(p.after.Has(MigShape::k1g, 1));  // the busy one stays
  EXPECT_TRUE(p.after.Has(MigShape::k3g, 4));
}

TEST_F(MigReshapeTest, AFreeInstanceOfTheShapeMeansNoReshape) {
  auto t = H100Node(1);
  ClusterUsage u(t);
  u.SetMigLayout(0, SevenOnes());
  Decisions d = Cycle(u, {"1g.10gb"});
  EXPECT_EQ(d.placements.size(), 1u);
  EXPECT_TRUE(d.mig_reshapes.empty());
}

TEST_F(MigReshapeTest, FixedLayoutsAndUnknownLayoutsAreLeftAlone) {
  auto t = H100Node(2);
  ClusterUsage u(t);
  u.SetMigLayout(0, SevenOnes(), /*fixed=*/true);  // GPU 1: layout unknown (instances on demand)
  Busy(u, 1, MigShape::k4g, 0);
  Busy(u, 1, MigShape::k3g, 4);
  Decisions d = Cycle(u, {"3g.40gb"});
  EXPECT_TRUE(d.placements.empty());
  EXPECT_TRUE(d.mig_reshapes.empty());
}

TEST_F(MigReshapeTest, AReshapeInFlightCountsAsSupply) {
  auto t = H100Node(2);
  ClusterUsage u(t);
  // GPU 0 is being re-cut to two 3g (the owner sets the target layout and marks it); GPU 1 is
  // empty and could be cut.
  u.SetMigLayout(0, Layout({{MigShape::k3g, 0}, {MigShape::k3g, 4}}));
  u.SetMigReshaping(0, true);
  u.SetMigLayout(1, MigLayout());
  Decisions one = Cycle(u, {"3g.40gb", "3g.40gb"});
  EXPECT_TRUE(one.placements.empty());    // GPU 0 takes nothing while it is re-cut
  EXPECT_TRUE(one.mig_reshapes.empty());  // both 3g are coming
  Decisions three = Cycle(u, {"3g.40gb", "3g.40gb", "3g.40gb"});
  ASSERT_EQ(three.mig_reshapes.size(), 1u);  // the third one's
  EXPECT_EQ(three.mig_reshapes[0].gpu, 1u);
  EXPECT_EQ(three.mig_reshapes[0].for_job, 3u);
  u.SetMigReshaping(0, false);
  EXPECT_EQ(Cycle(u, {"3g.40gb", "3g.40gb"}).placements.size(), 2u);
}

}  // namespace
}  // namespace hangar::sched
