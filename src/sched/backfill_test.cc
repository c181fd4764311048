#include "sched/backfill.h"

#include <gtest/gtest.h>

#include "sched/test_util.h"

namespace hangar::sched {
namespace {

using namespace sched::testing;

TEST(BackfillTest, ReservationIsTheEarliestFitAndItsNodes) {
  auto t = Leaves(1, 3);
  MiniCluster c(t);
  JobId a = c.Submit(Whole(*t, 1, 8), 0, 500, 500);  // node ends t=500
  JobId b = c.Submit(Whole(*t, 1, 8), 0, 200, 200);  // node ends t=200
  c.Submit(Whole(*t, 1, 8), 0, 900, 900);            // node ends t=900
  c.Step(0);
  JobId gang = c.Submit(Whole(*t, 2, 8), 1, 100, 100);
  Decisions d = c.Step(1);
  ASSERT_EQ(d.reservations.size(), 1u);
  EXPECT_EQ(d.reservations[0].job, gang);
  EXPECT_EQ(d.reservations[0].start, 500);  // the two nodes of a and b
  std::vector<uint32_t> expect = {c.AssignmentOf(a).tasks[0].node, c.AssignmentOf(b).tasks[0].node};
  std::sort(expect.begin(), expect.end());
  EXPECT_EQ(d.reservations[0].nodes, expect);
}

TEST(BackfillTest, ShortJobsBackfillLongOnesWait) {
  auto t = Leaves(1, 2);
  MiniCluster c(t);
  c.Submit(Whole(*t, 1, 4), 0, 300, 300);  // node 0 half busy until 300
  c.Submit(Whole(*t, 1, 8), 0, 300, 300);  // node 1 busy until 300
  c.Step(0);
  JobId gang = c.Submit(Whole(*t, 2, 8), 1, 100, 100);
  JobId shorty = c.Submit(Whole(*t, 1, 2), 2, 100, 100);   // ends by 102 < 300: may backfill
  JobId longy = c.Submit(Whole(*t, 1, 2), 3, 1000, 1000);  // would hold a reserved node past 300
  JobId no_limit = c.Submit(Whole(*t, 1, 1), 4, 10);       // no time limit: never ends "surely"
  Decisions d = c.Step(5);
  ASSERT_EQ(d.placements.size(), 1u);
  EXPECT_EQ(d.placements[0].job, shorty);
  EXPECT_TRUE(d.placements[0].backfilled);
  for (const auto& v : d.waiting) {
    if (v.job == longy || v.job == no_limit) {
      EXPECT_EQ(v.reason.rule, Rule::kNotNowReserved) << v.job;
      EXPECT_EQ(v.reason.other, gang);
    }
  }
  c.Step(300);
  EXPECT_TRUE(c.IsRunning(gang));
}

TEST(BackfillTest, NoReservationWithoutBackfill) {
  auto t = Leaves(1, 2);
  MiniCluster c(t, {.backfill = BackfillMode::kNone});
  c.Submit(Whole(*t, 1, 8), 0, 300, 300);
  c.Step(0);
  c.Submit(Whole(*t, 2, 8), 1, 100, 100);
  JobId small = c.Submit(Whole(*t, 1, 1), 2, 1000, 1000);
  Decisions d = c.Step(2);
  EXPECT_TRUE(d.reservations.empty());
  ASSERT_EQ(d.placements.size(), 1u);
  EXPECT_EQ(d.placements[0].job, small);
}

}  // namespace
}  // namespace hangar::sched
