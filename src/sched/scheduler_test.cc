#include "sched/scheduler.h"

#include <gtest/gtest.h>

#include "sched/queue/quota.h"
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

// The never-cache is keyed by fingerprint but compares the whole request on a hit: a request
// that can never fit must not be answered "could fit" because another shape shares its key.
TEST(SchedulerTest, NeverCacheComparesTheWholeRequestNotOnlyItsFingerprint) {
  auto t = Leaves(1, 1);
  auto s = Scheduler::Create({});
  ASSERT_TRUE(s.ok());
  GangRequest fits = Whole(*t, 1, 1), never = Whole(*t, 1, 9);
  never.fingerprint = fits.fingerprint;  // a collision, forced
  EXPECT_FALSE((*s)->NeverReason(*t, fits).IsNever());
  EXPECT_TRUE((*s)->NeverReason(*t, never).IsNever());
  EXPECT_FALSE((*s)->NeverReason(*t, fits).IsNever());
  EXPECT_TRUE(SamePlacement(fits, Whole(*t, 1, 1)));
  EXPECT_FALSE(SamePlacement(fits, never));
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
  for (uint32_t i = 0; i < jobs.size(); ++i)
    jobs[i] = {i + 1, &req, 0, job::Tier::kGuaranteed, 0, i, 0, 0, i};
  Snapshot snap;
  snap.usage = &usage;
  snap.pending = jobs;
  snap.cpu_only_pending = 0;
  Decisions d = s->Cycle(snap, 0);
  EXPECT_EQ(d.placements.size(), 8u);
  EXPECT_EQ(d.examined, 8u);
  EXPECT_EQ(d.not_examined.rule, Rule::kNotNowNotExamined);
}

std::vector<uint32_t> NodesOf(const Decisions& d) {
  std::vector<uint32_t> nodes;
  for (const auto& p : d.placements) {
    for (const auto& t : p.assignment.tasks) nodes.push_back(t.node);
  }
  return nodes;
}

// Two jobs of one shape whose preemption ranks differ by 31, one that may use the reserved
// nodes and one that may not, must not share a cached answer.
TEST(SchedulerTest, CacheKeysKeepTheReservedBitApartFromTheRank) {
  auto t = Leaves(1, 2);
  cluster::ClusterUsage u(t);
  const cluster::GangAssignment held = Hold(u, 0, 8);
  const GangRequest whole8 = Whole(*t, 1, 8), both = Whole(*t, 2, 8);
  RunningJob r;
  r.id = 1;
  r.request = &whole8;
  r.assignment = &held;
  r.priority = 1000;
  r.expected_end = 100;
  r.preemptible = false;
  std::vector<PendingJob> pending(3);
  pending[0] = {2, &both, 100, job::Tier::kGuaranteed, 0, 0,
                0, 0,     2};  // blocked: reserves both nodes
  // Rank 20*2+1 = 41, no time limit: may not use the reserved nodes, so it waits.
  pending[1] = {3, &whole8, 20, job::Tier::kGuaranteed, 0, 0, 0, 0, 3};
  // Rank 5*2 = 10, ends before the reservation: may use node 1.
  pending[2] = {4, &whole8, 5, job::Tier::kOpportunistic, 0, 0, 10, 0, 4};
  SchedulerConfig cfg;
  cfg.preemption.mode = PreemptionMode::kPriority;
  auto s = std::move(Scheduler::Create(cfg)).value();
  Snapshot snap;
  snap.usage = &u;
  snap.pending = pending;
  snap.running = std::span<const RunningJob>(&r, 1);
  Decisions d = s->Cycle(snap, 0);
  ASSERT_EQ(d.reservations.size(), 1u);
  EXPECT_EQ(d.reservations[0].job, 2u);
  EXPECT_EQ(VerdictFor(d, 3)->reason.rule, Rule::kNotNowReserved);
  ASSERT_EQ(d.placements.size(), 1u) << VerdictFor(d, 4)->reason.ToString(*t);
  EXPECT_EQ(d.placements[0].job, 4u);
  EXPECT_TRUE(d.placements[0].backfilled);
  EXPECT_EQ(NodesOf(d), std::vector<uint32_t>{1});
}

// A shape that failed before a preemption in the same cycle is tried again after it: the
// victim's release may have made room.
TEST(SchedulerTest, APreemptionInvalidatesTheAnswersItChanges) {
  auto t = Leaves(1, 1);
  cluster::ClusterUsage u(t);
  const cluster::GangAssignment held = Hold(u, 0, 8);
  const GangRequest whole8 = Whole(*t, 1, 8), four = Whole(*t, 1, 4), one = Whole(*t, 1, 1);
  RunningJob r;
  r.id = 1;
  r.request = &whole8;
  r.assignment = &held;
  std::vector<PendingJob> pending(3);
  pending[0] = {2, &four, 0, job::Tier::kGuaranteed, 0, 1, 0, 0, 2};  // outranks nobody: waits
  pending[1] = {3, &one, 10, job::Tier::kGuaranteed, 0, 2, 0, 0, 3};  // preempts job 1
  pending[2] = {4, &four, 0, job::Tier::kGuaranteed, 0, 3, 0, 0, 4};  // fits in the 7 GPUs left
  SchedulerConfig cfg;
  cfg.queue_policy = "fifo";
  cfg.backfill = BackfillMode::kNone;
  cfg.preemption.mode = PreemptionMode::kPriority;
  auto s = std::move(Scheduler::Create(cfg)).value();
  Snapshot snap;
  snap.usage = &u;
  snap.pending = pending;
  snap.running = std::span<const RunningJob>(&r, 1);
  Decisions d = s->Cycle(snap, 10);
  ASSERT_EQ(d.preemptions.size(), 1u);
  EXPECT_EQ(d.preemptions[0].victim, 1u);
  EXPECT_EQ(VerdictFor(d, 2)->reason.ToString(*t),
            "needs 4 free GPUs on one node; the emptiest node has 0");
  ASSERT_EQ(d.placements.size(), 2u) << VerdictFor(d, 4)->reason.ToString(*t);
  EXPECT_EQ(d.placements[0].job, 3u);
  EXPECT_EQ(d.placements[1].job, 4u);
  EXPECT_TRUE(d.placements[1].preempted.empty());
}

// One scheduler, the same snapshot twice: the same decisions, with the random scorer too, and
// the same as a fresh scheduler's. The draws restart from the snapshot's seed every cycle.
TEST(SchedulerTest, OneSchedulerDecidesTheSameForTheSameInputs) {
  auto t = Leaves(2, 4);
  cluster::ClusterUsage u(t);
  std::vector<GangRequest> reqs;
  for (int i = 0; i < 12; ++i) reqs.push_back(Whole(*t, 1 + i % 2, 1 + i % 3));
  std::vector<PendingJob> pending(reqs.size());
  for (uint32_t i = 0; i < pending.size(); ++i) {
    pending[i] = {i + 1, &reqs[i], 0, job::Tier::kGuaranteed, 0, i, 0, 0, i};
  }
  Snapshot snap;
  snap.usage = &u;
  snap.pending = pending;
  snap.random_seed = 42;
  for (const char* policy : {"random", "hangar", "fgd"}) {
    SCOPED_TRACE(policy);
    auto s = std::move(Scheduler::Create({.placement_policy = policy})).value();
    const std::vector<uint32_t> first = NodesOf(s->Cycle(snap, 100));
    ASSERT_EQ(first.size(), 18u);
    EXPECT_EQ(NodesOf(s->Cycle(snap, 100)), first);
    auto fresh = std::move(Scheduler::Create({.placement_policy = policy})).value();
    EXPECT_EQ(NodesOf(fresh->Cycle(snap, 100)), first);
  }
  // Another seed draws differently.
  auto s = std::move(Scheduler::Create({.placement_policy = "random"})).value();
  const std::vector<uint32_t> a = NodesOf(s->Cycle(snap, 100));
  snap.random_seed = 43;
  EXPECT_NE(NodesOf(s->Cycle(snap, 100)), a);
}

// The jobs a cycle stops before are named by id, in the cycle's order, not the owner's.
TEST(SchedulerTest, UnexaminedJobsAreNamedById) {
  auto t = Leaves(1, 1);
  MiniCluster c(t, {.max_placements = 1});
  const JobId low = c.Submit(Whole(*t, 1, 1), 0, 10, 0, 1);
  const JobId high = c.Submit(Whole(*t, 1, 1), 1, 10, 0, 9);
  const JobId mid = c.Submit(Whole(*t, 1, 1), 2, 10, 0, 5);
  Decisions d = c.Step(5);
  ASSERT_EQ(d.placements.size(), 1u);
  EXPECT_EQ(d.placements[0].job, high);
  EXPECT_EQ(d.not_examined.rule, Rule::kNotNowNotExamined);
  EXPECT_EQ(d.unexamined, (std::vector<JobId>{mid, low}));
}

// Quota verdicts are kept per (queue, shape) while the ledger holds still: every denied job of
// a shape hears the same words, and a placement in between is seen by the jobs after it.
TEST(SchedulerTest, QuotaVerdictsFollowTheLedger) {
  auto t = Leaves(1, 2);
  auto specs = job::ParseQueues(
      "queues:\n  - name: a\n    quota: {gpus: 4}\n    borrowing_limit: {gpus: 0}\n"
      "  - name: b\n    quota: {gpus: 8}\n",
      "queues.yaml");
  ASSERT_TRUE(specs.ok()) << specs.status().ToString();
  auto tree = queue::QueueTree::Build(*specs, *t);
  ASSERT_TRUE(tree.ok()) << tree.status().ToString();
  const uint32_t a = static_cast<uint32_t>((*tree)->FindLeaf("a"));
  cluster::ClusterUsage u(t);
  const GangRequest two = Whole(*t, 1, 2);
  std::vector<PendingJob> pending(4);
  pending[0] = {1, &two, 0, job::Tier::kGuaranteed, a, 0, 0, 0, 1};  // within: placed
  pending[1] = {2, &two, 0, job::Tier::kGuaranteed, a, 1, 0, 0, 2};  // within: placed, a is full
  pending[2] = {3, &two, 0, job::Tier::kGuaranteed, a, 2, 0, 0, 3};  // denied
  pending[3] = {4, &two, 0, job::Tier::kGuaranteed, a, 3, 0, 0, 4};  // denied, same words
  auto s = std::move(Scheduler::Create({.queue_policy = "fifo"})).value();
  Snapshot snap;
  snap.usage = &u;
  snap.pending = pending;
  snap.queues = tree->get();
  Decisions d = s->Cycle(snap, 0);
  ASSERT_EQ(d.placements.size(), 2u);
  const Verdict* v3 = VerdictFor(d, 3);
  const Verdict* v4 = VerdictFor(d, 4);
  ASSERT_TRUE(v3 && v4);
  EXPECT_EQ(v3->reason.rule, Rule::kNotNowQuota);
  EXPECT_EQ(v4->reason.rule, Rule::kNotNowQuota);
  EXPECT_FALSE(v3->detail.empty());
  EXPECT_EQ(v3->detail, v4->detail);
}

TEST(SchedulerTest, UnknownPolicyIsAClearError) {
  auto s = Scheduler::Create({.placement_policy = "tetris"});
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("unknown placement policy 'tetris'"), std::string::npos);
}

}  // namespace
}  // namespace hangar::sched
