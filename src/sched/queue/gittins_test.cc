#include "sched/queue/gittins.h"

#include <gtest/gtest.h>

namespace hangar::sched::queue {
namespace {

using Dist = RuntimeDistribution;

Dist Finished(std::initializer_list<std::pair<Duration, int>> runs,
              std::vector<Duration> alive = {}) {
  Dist d;
  for (auto [run_time, count] : runs) {
    for (int i = 0; i < count; ++i) d.AddFinished(run_time);
  }
  d.Reestimate(alive);
  return d;
}

TEST(GittinsTest, BinsCoverEveryAgeOnce) {
  EXPECT_EQ(Dist::BinOf(0), 0u);
  EXPECT_EQ(Dist::BinOf(999), 0u);
  EXPECT_EQ(Dist::BinOf(1000), 1u);
  for (size_t b = 1; b < 200; ++b) {
    EXPECT_EQ(Dist::BinOf(Dist::BinStart(b)), b);
    EXPECT_EQ(Dist::BinOf(Dist::BinStart(b + 1) - 1), b);
  }
  // Eight bins per octave: 1,024 s is ten octaves up.
  EXPECT_EQ(Dist::BinOf(1024 * kSecond), 81u);
}

TEST(GittinsTest, EqualRunTimesRankByTimeLeft) {
  const Dist d = Finished({{100 * kSecond, 10}});
  EXPECT_EQ(d.RankPerGpu(0), 100 * kSecond);
  // A rank holds for a whole bin of age and is taken at its start.
  const Duration start = Dist::BinStart(Dist::BinOf(60 * kSecond));
  EXPECT_EQ(d.RankPerGpu(60 * kSecond), 100 * kSecond - start);
  EXPECT_EQ(d.RankPerGpu(120 * kSecond), -1);  // no finished job ran longer
}

TEST(GittinsTest, HeavyTailFavoursYoungJobs) {
  // Nine jobs of 1 s and one of 1,000 s: serve 1 s, and 90% complete. A job past that is the
  // long one.
  const Dist d = Finished({{kSecond, 9}, {1000 * kSecond, 1}});
  EXPECT_EQ(d.RankPerGpu(0), 1111);  // (0.9 x 1 s + 0.1 x 1 s) / 0.9
  EXPECT_GT(d.RankPerGpu(2 * kSecond), 990 * kSecond);
}

TEST(GittinsTest, ClusteredRunTimesFavourOldJobs) {
  // Near its end a job is cheaper to finish than a fresh one (LAS would do the opposite).
  const Dist d = Finished({{90 * kSecond, 3}, {100 * kSecond, 3}, {110 * kSecond, 3}});
  EXPECT_LT(d.RankPerGpu(85 * kSecond), d.RankPerGpu(0) / 3);
}

TEST(GittinsTest, JobsStillRunningLengthenTheEstimate) {
  // Five finished after 10 s, five are still running at 1,000 s: Kaplan-Meier leaves half the
  // mass beyond 1,000 s, so stopping at 10 s completes only half the jobs.
  EXPECT_EQ(Finished({{10 * kSecond, 5}}).RankPerGpu(0), 10 * kSecond);
  const Duration alive = 1000 * kSecond;
  const Dist d = Finished({{10 * kSecond, 5}}, {alive, alive, alive, alive, alive});
  EXPECT_EQ(d.RankPerGpu(0), 20 * kSecond);
}

TEST(GittinsTest, RankerLearnsPerClassAndScalesByWidth) {
  GittinsRanker r({.min_class_samples = 2, .reestimate_growth_pct = 5});
  // Nothing learned: the expected remainder is the age, as under least attained service.
  EXPECT_EQ(r.Rank(7, 0, 1000), kSecond);
  EXPECT_EQ(r.Rank(7, 4096 * kSecond, 8000), 8 * 4096 * kSecond);
  EXPECT_TRUE(r.Finished(7, 100 * kSecond));
  const uint64_t before = r.version();
  r.Reestimate({});
  EXPECT_NE(r.version(), before);
  // One sample: class 7 is below min_class_samples and borrows the pooled distribution, which
  // holds the same job.
  EXPECT_EQ(r.Rank(7, 0, 8000), 8 * 100 * kSecond);
  EXPECT_TRUE(r.Finished(9, 10 * kSecond));
  EXPECT_TRUE(r.Finished(9, 10 * kSecond));
  r.Reestimate({});
  EXPECT_EQ(r.Rank(9, 0, 1000), 10 * kSecond);
  // Class 9's jobs all ran 10 s; an older one falls back to the pooled distribution.
  EXPECT_EQ(r.Rank(9, 50 * kSecond, 1000),
            100 * kSecond - Dist::BinStart(Dist::BinOf(50 * kSecond)));
}

TEST(GittinsTest, AClassWithFewJobsBorrowsItsParentsEstimate) {
  GittinsRanker r({.min_class_samples = 2, .reestimate_growth_pct = 5});
  // Parent 5 learns 100 s jobs through its sub-classes 50 and 51 and directly; class 60's
  // 10 s jobs go to the pool only.
  (void)r.Finished(50, 100 * kSecond, 5);
  (void)r.Finished(51, 100 * kSecond, 5);
  (void)r.Finished(60, 10 * kSecond);
  (void)r.Finished(60, 10 * kSecond);
  r.Reestimate({});
  // Class 50 has one job: it borrows parent 5 (two jobs of 100 s) rather than the pool.
  EXPECT_EQ(r.Rank(50, 0, 1000, 5), 100 * kSecond);
  // Without a parent, or with one that knows too little, the pool: half 10 s, half 100 s.
  EXPECT_LT(r.Rank(50, 0, 1000), 100 * kSecond);
  EXPECT_EQ(r.Rank(50, 0, 1000, 7), r.Rank(50, 0, 1000));
  // A sub-class with enough jobs of its own uses them.
  (void)r.Finished(50, 1000 * kSecond, 5);
  r.Reestimate({});
  EXPECT_GT(r.Rank(50, 0, 1000, 5), r.Rank(5, 0, 1000));
}

TEST(GittinsTest, EstimatesAreDueAsClassesGrow) {
  GittinsRanker r({.min_class_samples = 1, .reestimate_growth_pct = 50});
  // Due after 1, 2, 3, 4 finished jobs (at least one more each time), then 6 (4 + 50%), 9.
  std::vector<int> due_at;
  for (int n = 1; n <= 10; ++n) {
    if (r.Finished(1, kSecond)) {
      due_at.push_back(n);
      r.Reestimate({});
    }
  }
  EXPECT_EQ(due_at, (std::vector<int>{1, 2, 3, 4, 6, 9}));
}

TEST(GittinsTest, RanksHoldUntilTheNextStep) {
  GittinsRanker r({.min_class_samples = 1});
  for (int i = 1; i <= 20; ++i) (void)r.Finished(1, i * 37 * kSecond);
  r.Reestimate({});
  for (Duration age : {Duration{0}, 5 * kSecond, 123 * kSecond, 700 * kSecond, 5000 * kSecond}) {
    const Duration next = GittinsRanker::NextStep(age);
    ASSERT_GT(next, age);
    EXPECT_EQ(r.Rank(1, age, 1000), r.Rank(1, next - 1, 1000)) << age;
  }
}

}  // namespace
}  // namespace hangar::sched::queue
