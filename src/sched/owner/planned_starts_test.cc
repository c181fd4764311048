#include "sched/owner/planned_starts.h"

#include <gtest/gtest.h>

#include "sched/test_util.h"

namespace hangar::sched::owner {
namespace {

using Due = PlannedStarts::Due;

// Two 8-GPU nodes; an assignment of whole GPUs `first`..`first+count-1` on node `node`.
cluster::GangAssignment Gpus(uint32_t node, uint32_t first, uint32_t count) {
  cluster::GangAssignment a;
  cluster::TaskPlacement t;
  t.node = node;
  t.first_grant = 0;
  t.end_grant = count;
  a.tasks.push_back(t);
  for (uint32_t g = 0; g < count; ++g) a.grants.push_back({node * 8 + first + g, 1000, 0});
  return a;
}

Placement PlacementOf(JobId job, cluster::GangAssignment a) {
  Placement p;
  p.job = job;
  p.assignment = std::move(a);
  return p;
}

class PlannedStartsTest : public ::testing::Test {
 protected:
  std::shared_ptr<const cluster::Topology> topology_ = testing::Leaves(1, 2);
  cluster::ClusterUsage usage_{topology_};
  PlannedStarts plans_;
};

TEST_F(PlannedStartsTest, PlansStartInTheOrderTheCyclesMadeThemWhenDue) {
  plans_.Plan(7, PlacementOf(7, Gpus(0, 0, 2)));
  plans_.Plan(3, PlacementOf(3, Gpus(0, 2, 2)));
  plans_.Plan(5, PlacementOf(5, Gpus(1, 0, 2)));
  std::vector<PlannedStarts::Key> started;
  auto start = [&](PlannedStarts::Key k, Placement& p) {
    EXPECT_EQ(p.job, k);
    started.push_back(k);
  };
  // 3 still waits for its victims; 5 is no longer pending.
  plans_.StartDue(
      usage_,
      [](PlannedStarts::Key k) { return k == 3   ? Due::kWait
                                        : k == 5 ? Due::kDrop
                                                 : Due::kStart; },
      start);
  EXPECT_EQ(started, (std::vector<PlannedStarts::Key>{7}));
  EXPECT_TRUE(plans_.planned(3));
  EXPECT_FALSE(plans_.planned(5));
  EXPECT_FALSE(plans_.planned(7));
  plans_.StartDue(
      usage_, [](PlannedStarts::Key) { return Due::kStart; }, start);
  EXPECT_EQ(started, (std::vector<PlannedStarts::Key>{7, 3}));
  EXPECT_TRUE(plans_.empty());
}

TEST_F(PlannedStartsTest, HeldGpusAreTakenFromOthersAndGivenBackWhenTheJobStarts) {
  ASSERT_TRUE(usage_.Allocate(Gpus(0, 0, 4)).ok());  // a victim, still stopping, on GPUs 0-3
  plans_.Plan(9, PlacementOf(9, Gpus(0, 0, 8)));
  plans_.HoldWhatIsFree(9, usage_, Gpus(0, 0, 8));  // GPUs 4-7 are free now: held for job 9
  EXPECT_TRUE(plans_.holds(9));
  for (uint32_t g = 4; g < 8; ++g) EXPECT_EQ(usage_.gpu_free_milli(g), 0) << "GPU " << g;
  // The victim stops: its GPUs join the hold.
  usage_.Release(Gpus(0, 0, 4));
  ASSERT_TRUE(usage_.Allocate(Gpus(0, 0, 4)).ok());
  plans_.Hold(9, Gpus(0, 0, 4));
  // Due: the hold goes back before `start` sees the placement, so the job can allocate it whole.
  bool allocated = false;
  plans_.StartDue(
      usage_, [](PlannedStarts::Key) { return Due::kStart; },
      [&](PlannedStarts::Key, Placement& p) { allocated = usage_.Allocate(p.assignment).ok(); });
  EXPECT_TRUE(allocated);
  EXPECT_FALSE(plans_.holds(9));
}

TEST_F(PlannedStartsTest, HoldsOfJobsThatStoppedWaitingGoBackAndAForgottenJobKeepsNothing) {
  plans_.HoldWhatIsFree(1, usage_, Gpus(0, 0, 2));
  plans_.HoldWhatIsFree(2, usage_, Gpus(1, 0, 2));
  plans_.Plan(2, PlacementOf(2, Gpus(1, 0, 2)));
  plans_.ReleaseHolds(usage_, [](PlannedStarts::Key k) { return k == 2; });
  EXPECT_FALSE(plans_.holds(1));
  EXPECT_EQ(usage_.gpu_free_milli(0), 1000);
  EXPECT_TRUE(plans_.holds(2));
  EXPECT_EQ(usage_.gpu_free_milli(8), 0);
  plans_.Forget(2, usage_);
  EXPECT_FALSE(plans_.holds(2));
  EXPECT_FALSE(plans_.planned(2));
  EXPECT_EQ(usage_.gpu_free_milli(8), 1000);
}

}  // namespace
}  // namespace hangar::sched::owner
