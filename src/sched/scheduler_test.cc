#include "sched/scheduler.h"

#include <gtest/gtest.h>

#include "sched/test_util.h"

namespace hangar::sched {
namespace {

using namespace sched::testing;

const Verdict* VerdictFor(const Decisions& d, JobId id) {
  for (const auto& v : d.waiting) {
    if (v.job == id) return &v;
  }
  return nullptr;
}

TEST(SchedulerTest, HigherPriorityGoesFirst) {
  auto t = Leaves(1, 1);
  MiniCluster c(t);
  JobId low = c.Submit(Whole(*t, 1, 8), 0, 100, 0, /*priority=*/1);
  JobId high = c.Submit(Whole(*t, 1, 8), 5, 100, 0, /*priority=*/9);
  Decisions d = c.Step(10);
  ASSERT_EQ(d.placements.size(), 1u);
  EXPECT_EQ(d.placements[0].job, high);
  const Verdict* v = VerdictFor(d, low);
  ASSERT_NE(v, nullptr);
  EXPECT_EQ(v->reason.ToString(*t), "needs 8 free GPUs on one node; the emptiest node has 0");
}

TEST(SchedulerTest, NeverJobsAreReportedAndDoNotBlock) {
  auto t = Leaves(1, 1);
  MiniCluster c(t, {.strict_order = true});
  JobId never = c.Submit(Whole(*t, 1, 9), 0, 10);
  JobId ok = c.Submit(Whole(*t, 1, 1), 1, 10);
  Decisions d = c.Step(2);
  ASSERT_EQ(d.placements.size(), 1u);
  EXPECT_EQ(d.placements[0].job, ok);
  EXPECT_TRUE(VerdictFor(d, never)->reason.IsNever());
}

TEST(SchedulerTest, StrictOrderBlocksEverythingBehindTheHead) {
  auto t = Leaves(1, 1);
  MiniCluster c(t, {.queue_policy = "fifo", .strict_order = true});
  c.Submit(Whole(*t, 1, 4), 0, 100);
  JobId big = c.Submit(Whole(*t, 1, 8), 1, 100);
  JobId small = c.Submit(Whole(*t, 1, 1), 2, 100);
  Decisions d = c.Step(3);
  ASSERT_EQ(d.placements.size(), 1u);
  EXPECT_EQ(VerdictFor(d, big)->reason.rule, Rule::kNotNowNodeGpus);
  const Verdict* v = VerdictFor(d, small);
  ASSERT_NE(v, nullptr);
  EXPECT_EQ(v->reason.rule, Rule::kNotNowBlocked);
  EXPECT_EQ(v->reason.ToString(*t), "strict order: waits behind job " + std::to_string(big));
}

TEST(SchedulerTest, DeterministicForTheSameInputs) {
  auto run = [] {
    auto t = Leaves(2, 4);
    MiniCluster c(t);
    std::vector<std::vector<uint32_t>> nodes;
    for (int i = 0; i < 20; ++i) c.Submit(Whole(*t, 1 + i % 3, 1 + i % 8), i, 1000);
    Decisions d = c.Step(100);
    for (const auto& p : d.placements) {
      std::vector<uint32_t> n;
      for (const auto& g : p.assignment.grants) n.push_back(g.gpu);
      nodes.push_back(n);
    }
    return nodes;
  };
  EXPECT_EQ(run(), run());
}

// A big gang must not starve behind a stream of small jobs that would each fit now.
TEST(SchedulerTest, BigGangDoesNotStarveBehindSmallJobs) {
  auto t = Leaves(1, 2);
  MiniCluster c(t);
  c.Submit(Whole(*t, 1, 8), 0, 100, 100);  // holds node 0 until t=100
  c.Submit(Whole(*t, 1, 4), 0, 50, 50);    // half of node 1 until t=50
  c.Step(0);
  JobId gang = c.Submit(Whole(*t, 2, 8), 1, 1000, 1000);
  // Small jobs keep coming, each would fit on node 1 right now and each runs 500 s.
  Time now = 1;
  for (; now <= 400; now += 10) {
    c.Submit(Whole(*t, 1, 1), now, 500, 500);
    c.Step(now);
    if (c.StartOf(gang)) break;
  }
  ASSERT_TRUE(c.StartOf(gang).has_value()) << "the gang starved";
  EXPECT_LE(*c.StartOf(gang), 101);
}

TEST(SchedulerTest, PlacementCapStopsTheCycle) {
  auto t = Leaves(1, 2);
  MiniCluster c(t, {.max_placements = 3});
  for (int i = 0; i < 10; ++i) c.Submit(Whole(*t, 1, 1), i, 10);
  Decisions d = c.Step(20);
  EXPECT_EQ(d.placements.size(), 3u);
  EXPECT_EQ(d.not_examined.rule, Rule::kNotNowNotExamined);
}

TEST(SchedulerTest, StopsEarlyWhenNoGpuIsLeft) {
  auto t = Leaves(1, 1);
  auto s = std::move(Scheduler::Create({})).value();
  cluster::ClusterUsage usage(t);
  auto req = Whole(*t, 1, 1);
  std::vector<PendingJob> jobs(1000);
  for (uint32_t i = 0; i < jobs.size(); ++i) jobs[i] = {i + 1, &req, 0, job::Tier::kGuaranteed, 0, i, 0, 0, i};
  Snapshot snap;
  snap.usage = &usage;
  snap.pending = jobs;
  snap.cpu_only_pending = 0;
  Decisions d = s->Cycle(snap, 0);
  EXPECT_EQ(d.placements.size(), 8u);
  EXPECT_EQ(d.examined, 8u);
  EXPECT_EQ(d.not_examined.rule, Rule::kNotNowNotExamined);
}

TEST(SchedulerTest, UnknownPolicyIsAClearError) {
  auto s = Scheduler::Create({.placement_policy = "tetris"});
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("unknown placement policy 'tetris'"), std::string::npos);
}

}  // namespace
}  // namespace hangar::sched
