#include "sim/engine/grace_stops.h"

#include <gtest/gtest.h>

namespace hangar::sim {
namespace {

std::unique_ptr<Running> Held(size_t j, int64_t milli) {
  auto r = std::make_unique<Running>();
  r->job = j;
  r->milli = milli;
  return r;
}

// Victims 1 and 2 are preempted for job 5; job 6 was placed on GPUs victim 2 holds.
TEST(GraceStopsTest, AJobWaitsUntilEveryVictimItWaitsForHasStopped) {
  GraceStops g;
  g.Begin(1, Held(1, 8000), 60, 1);
  g.Begin(2, Held(2, 4000), 30, 1);
  g.Await(5, 2);
  g.PreemptedFor(1, 5);
  g.PreemptedFor(2, 5);
  g.PreemptedFor(2, 7);  // the first job counts
  g.AlsoWaitsFor(2, 6);
  g.Await(6, 1);
  g.Await(8, 0);  // waits for none
  EXPECT_FALSE(g.Awaits(8));
  EXPECT_TRUE(g.Stopping(1) && g.Stopping(2));
  EXPECT_EQ(g.ForJob(2), 5u);
  EXPECT_EQ(g.ForJob(3), SIZE_MAX);
  EXPECT_EQ(g.NextStop(), 30);
  EXPECT_EQ(g.PopDue(29), SIZE_MAX);
  ASSERT_EQ(g.PopDue(30), 2u);
  std::vector<size_t> settled;
  std::unique_ptr<Running> two = g.Stop(2, &settled);
  ASSERT_TRUE(two);
  EXPECT_EQ(two->milli, 4000);
  EXPECT_EQ(settled, std::vector<size_t>{6});  // job 5 still waits for victim 1
  EXPECT_TRUE(g.Awaits(5));
  EXPECT_FALSE(g.Awaits(6));
  EXPECT_EQ(g.NextStop(), 60);
  settled.clear();
  ASSERT_EQ(g.PopDue(100), 1u);
  ASSERT_TRUE(g.Stop(1, &settled));
  EXPECT_EQ(settled, std::vector<size_t>{5});
  EXPECT_EQ(g.NextStop(), kNever);
  EXPECT_EQ(g.Stop(1, &settled), nullptr);  // stopped once
  EXPECT_TRUE(g.stopping().empty());
}

TEST(GraceStopsTest, AWithdrawnJobWaitsNoMore) {
  GraceStops g;
  g.Begin(1, Held(1, 1000), 10, 1);
  g.Await(5, 1);
  g.PreemptedFor(1, 5);
  g.StopAwaiting(5);
  std::vector<size_t> settled;
  ASSERT_TRUE(g.Stop(1, &settled));
  EXPECT_TRUE(settled.empty());
  g.Begin(3, Held(3, 1000), 10, 1);
  g.Clear();
  EXPECT_FALSE(g.Stopping(3));
  EXPECT_EQ(g.NextStop(), kNever);
}

}  // namespace
}  // namespace hangar::sim
