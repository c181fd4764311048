#include "sim/engine/running_table.h"

#include <gtest/gtest.h>

namespace hangar::sim {
namespace {

void Start(RunningTable& t, size_t j) {
  auto run = std::make_unique<Running>();
  run->job = j;
  run->start = static_cast<Time>(j * 10);
  sched::RunningJob seen;
  seen.id = 100 + j;
  Running& kept = t.Add(std::move(run), seen, {j, 1000, 0, 0, {}});
  t.seen().back().assignment = &kept.assignment;  // the run stays put
}

TEST(RunningTableTest, ARemovedRunsPlaceGoesToTheLastAndEveryJobIsStillFound) {
  RunningTable t;
  t.Reset(5);
  for (size_t j : {0, 2, 4}) Start(t, j);
  EXPECT_EQ(t.PositionOf(2), 1u);
  EXPECT_EQ(t.Find(1), nullptr);
  EXPECT_EQ(t.Find(9), nullptr);  // beyond the jobs
  const cluster::GangAssignment* four = &t.Find(4)->assignment;
  std::unique_ptr<Running> gone = t.Remove(0);
  ASSERT_TRUE(gone);
  EXPECT_EQ(gone->start, 0);
  EXPECT_EQ(t.Find(0), nullptr);
  EXPECT_EQ(t.PositionOf(0), SIZE_MAX);
  // Job 4 took position 0; what the scheduler sees and what a cycle updates moved together.
  EXPECT_EQ(t.PositionOf(4), 0u);
  EXPECT_EQ(t.seen()[0].id, 104u);
  EXPECT_EQ(t.info()[0].job, 4u);
  EXPECT_EQ(t.seen()[0].assignment, four);
  EXPECT_EQ(t.seen()[1].id, 102u);
  EXPECT_EQ(t.Find(2)->start, 20);
  t.Reset(5);
  EXPECT_TRUE(t.seen().empty());
  EXPECT_EQ(t.Find(2), nullptr);
}

}  // namespace
}  // namespace hangar::sim
