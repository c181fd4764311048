#include <gtest/gtest.h>

#include "sched/owner/ranks.h"
#include "sched/owner/workload.h"
#include "sched/test_util.h"

namespace hangar::sched::owner {
namespace {

using namespace sched::testing;

TEST(WorkloadLearnerTest, CountsTasksAndRebuildsOnlyAsTheMixGrows) {
  auto t = Leaves(1, 2);
  WorkloadLearner w;
  EXPECT_EQ(w.profile(), nullptr);
  const GangRequest four = Whole(*t, 4, 1), two = Whole(*t, 1, 2);
  w.Add(four);  // 4 tasks of 1 GPU
  w.Add(two);   // 1 task of 2 GPUs
  const WorkloadProfile* p = w.profile();
  ASSERT_NE(p, nullptr);
  ASSERT_EQ(p->tasks().size(), 2u);
  EXPECT_EQ(p->tasks()[0].gpus, 1);
  EXPECT_EQ(p->tasks()[0].milli, 1000);
  EXPECT_DOUBLE_EQ(p->tasks()[0].weight, 0.8);
  const uint64_t id = p->id();
  EXPECT_EQ(w.profile()->id(), id);  // nothing new: the same profile (scorers cache by its id)
  w.Add(two);                        // a known shape among few tasks: +20%, rebuilt
  EXPECT_NE(w.profile()->id(), id);
  EXPECT_EQ(w.tasks(), 6);
}

TEST(RankBookTest, LearnsFromFinishedJobsAndCachesUntilTheNextStep) {
  RankBook book;
  CachedRank quick_rank, slow_rank;
  const RankClass quick{1, 0}, slow{2, 0};
  // Nothing learned: the rank orders like attained service (a fresh job ranks 0 either way).
  EXPECT_EQ(book.RankOf(quick, 0, 1000, &quick_rank), book.RankOf(slow, 0, 1000, &slow_rank));
  for (int i = 0; i < 10; ++i) {
    book.Finished(quick, 10 * kSecond);
    book.Finished(slow, 1000 * kSecond);
  }
  ASSERT_TRUE(book.due());
  book.Reestimate({});
  EXPECT_FALSE(book.due());
  EXPECT_FALSE(book.Holds(quick_rank, 0));  // the estimate changed
  EXPECT_LT(book.RankOf(quick, 0, 1000, &quick_rank), book.RankOf(slow, 0, 1000, &slow_rank));
  EXPECT_TRUE(book.Holds(quick_rank, 0));
}

TEST(OwnerTest, ClassByPredecessorRefinesTheShapeByTheOctaveOfItsRunTime) {
  const uint64_t shape = 42;
  EXPECT_EQ(ClassByPredecessor(shape, -1).job_class, shape);  // no finished predecessor
  EXPECT_EQ(ClassByPredecessor(shape, -1).parent, 0u);
  const RankClass a = ClassByPredecessor(shape, 40 * kSecond);
  EXPECT_EQ(a.parent, shape);
  EXPECT_NE(a.job_class, shape);
  // 40 s and 50 s share an octave (32-63 s); 70 s is the next one; another shape differs.
  EXPECT_EQ(ClassByPredecessor(shape, 50 * kSecond).job_class, a.job_class);
  EXPECT_NE(ClassByPredecessor(shape, 70 * kSecond).job_class, a.job_class);
  EXPECT_NE(ClassByPredecessor(shape + 1, 40 * kSecond).job_class, a.job_class);
  // Under a second counts as one second, not as no predecessor.
  EXPECT_EQ(ClassByPredecessor(shape, 0).job_class, ClassByPredecessor(shape, 999).job_class);
}

TEST(OwnerTest, AttainedServiceCountsTheCurrentRun) {
  EXPECT_EQ(AttainedService(500, 2000, 10 * kSecond, 12 * kSecond), 500 + 4000);
  EXPECT_EQ(AttainedService(500, 2000, 12 * kSecond, 12 * kSecond), 500);
}

}  // namespace
}  // namespace hangar::sched::owner
