#include "sim/engine/rank_keeper.h"

#include <gtest/gtest.h>

#include "sim/engine/sim_test_util.h"

namespace hangar::sim {
namespace {

using testing::Job;

// Three jobs of one shape in submission order, and one of another.
JobTable Sweep() {
  JobTable t;
  t.Add(Job(1, 0, 100, 1));
  t.Add(Job(2, 1, 100, 1));
  t.Add(Job(3, 2, 100, 2));
  t.Add(Job(4, 3, 100, 1));
  EXPECT_TRUE(t.Start(nullptr).ok());
  return t;
}

TEST(RankKeeperTest, AJobIsRankedByItsShapeUntilItsPredecessorHasFinished) {
  JobTable t = Sweep();
  RankKeeper k({}, /*by_predecessor=*/true);
  const std::vector<size_t> arrivals = {0, 1, 2, 3};
  k.Start(t, arrivals);
  const uint64_t shape = t.spec(1).request->fingerprint;
  EXPECT_EQ(k.ClassOf(t, 1).job_class, shape);  // job 1 has not finished
  EXPECT_EQ(k.ClassOf(t, 1).parent, 0u);
  t.at(0).ran = 100 * kSecond;
  t.result(0).end = 100 * kSecond;
  // Job 1 finished: its successor of the same shape (job 4, index 3; job 3 is another shape).
  EXPECT_EQ(k.Finished(t, 0), 1u);
  const sched::owner::RankClass c = k.ClassOf(t, 1);
  EXPECT_EQ(c.parent, shape);  // refined by the octave of its predecessor's run, shape behind
  EXPECT_NE(c.job_class, shape);
  EXPECT_EQ(c.job_class, sched::owner::ClassByPredecessor(shape, 100 * kSecond).job_class);
  t.result(1).end = 200 * kSecond;
  EXPECT_EQ(k.Finished(t, 1), 3u);
  t.result(3).end = 150 * kSecond;
  EXPECT_EQ(k.Finished(t, 3), SIZE_MAX);  // the last of the sweep
  k.Reclassed(3);
  EXPECT_EQ(k.TakeReclassed(), std::vector<size_t>{3});
  EXPECT_TRUE(k.TakeReclassed().empty());
}

TEST(RankKeeperTest, ByShapeAloneAndTheVersionMovesWhenAReestimateChangesRanks) {
  JobTable t = Sweep();
  RankKeeper k({}, /*by_predecessor=*/false);
  const std::vector<size_t> arrivals = {0, 1, 2, 3};
  k.Start(t, arrivals);
  t.result(0).end = 10 * kSecond;
  EXPECT_EQ(k.ClassOf(t, 1).job_class, t.spec(1).request->fingerprint);
  EXPECT_EQ(k.Finished(t, 0), SIZE_MAX);  // no successors without by_predecessor
  const int64_t before = k.RankOf(t, 1, 0);
  EXPECT_EQ(k.RankOf(t, 1, 0), before);  // cached
  (void)k.NewVersion();
  EXPECT_FALSE(k.NewVersion());  // nothing learnt since
  for (int i = 0; i < 50; ++i) {
    t.at(0).ran = (i + 1) * kSecond;
    k.Finished(t, 0);
  }
  ASSERT_TRUE(k.due());
  k.Reestimate({});
  EXPECT_TRUE(k.NewVersion());
  EXPECT_FALSE(k.NewVersion());  // said once
}

}  // namespace
}  // namespace hangar::sim
