#include "controller/state/job_learning.h"

#include <gtest/gtest.h>

namespace hangar::controller {
namespace {

sched::GangRequest Shape(int gpus) {
  sched::TaskShape s;
  s.kind = job::GpuKind::kWhole;
  s.gpus = gpus;
  s.milli = 1000;
  return sched::MakeSingleTaskRequest(s, 1);
}

AttemptUsage Row(sched::JobId job, Time start, Time end, std::string how, int64_t milli = 1000) {
  AttemptUsage u;
  u.job = job;
  u.start = start;
  u.end = end;
  u.milli_gpu = milli;
  u.how = std::move(how);
  return u;
}

TEST(JobLearningTest, ServiceIsSummedOverAttemptsAndForgottenWhenTheJobEnds) {
  JobLearning l;
  const auto req = Shape(2);
  l.Submitted(1, &req, false);
  l.Submitted(2, nullptr, false);  // no request: skipped, but counted as seen
  EXPECT_EQ(l.submitted_upto(), 2u);
  std::vector<AttemptUsage> log = {Row(1, 0, 10'000, "requeued", 2000)};
  auto none = [](sched::JobId) -> const sched::GangRequest* { return nullptr; };
  l.Ended(log, false, false, none);
  ASSERT_NE(l.Find(1), nullptr);
  EXPECT_EQ(l.Find(1)->attained_gpu_ms, 20'000);
  EXPECT_EQ(l.Find(1)->ran, 10'000);
  log.push_back(Row(1, 20'000, 25'000, "succeeded", 2000));
  l.Ended(log, false, false, none);  // only the new row is folded
  EXPECT_EQ(l.Find(1), nullptr);     // it succeeded: forgotten
}

TEST(JobLearningTest, AFinishedPredecessorClassesItsSuccessorByHowLongItRan) {
  JobLearning l;
  const auto req = Shape(4);
  l.Submitted(1, &req, true);
  l.Submitted(2, &req, true);  // job 1 is its predecessor (same shape, just before)
  const sched::owner::RankClass before = l.ClassOf(2, req);
  EXPECT_EQ(before.job_class, req.fingerprint);
  EXPECT_EQ(before.parent, 0u);
  std::vector<AttemptUsage> log = {Row(1, 0, 100 * kSecond, "succeeded")};
  l.Ended(log, true, true, [&](sched::JobId) { return &req; });
  const sched::owner::RankClass after = l.ClassOf(2, req);
  EXPECT_NE(after.job_class, req.fingerprint);
  EXPECT_EQ(after.parent, req.fingerprint);  // falls back to the shape
  // A rank cached for the old class is recomputed for the new one.
  JobLearning::Service& s = l.Of(2);
  s.rank_class = before.job_class;
  l.RankOf(2, req, 0, &s);
  EXPECT_EQ(s.rank_class, after.job_class);
  // Job 2 ends: its link is gone, and so is its predecessor's run time.
  log.push_back(Row(2, 0, kSecond, "cancelled"));
  l.Ended(log, true, true, [&](sched::JobId) { return &req; });
  EXPECT_EQ(l.ClassOf(2, req).parent, 0u);
}

TEST(JobLearningTest, JobsThatNeverRanAreSweptOnlyPastTheBound) {
  JobLearning l;
  for (sched::JobId id = 1; id <= 300; ++id) l.Of(id);
  l.Sweep(100, [](sched::JobId id) { return id > 10; });  // 300 <= 4*100+256: kept
  EXPECT_EQ(l.services().size(), 300u);
  l.Sweep(5, [](sched::JobId id) { return id > 10; });  // 300 > 276: the ended go
  EXPECT_EQ(l.services().size(), 10u);
}

}  // namespace
}  // namespace hangar::controller
