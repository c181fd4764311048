// The cycle's stages one by one (cycle.h): admission, fair-share order, backfill, preemption and
// the per-shape answers, each on its own Context, without Scheduler::Cycle around them.
#include "sched/cycle.h"

#include <gtest/gtest.h>

#include <deque>

#include "job/queue_spec.h"
#include "sched/test_util.h"

namespace hangar::sched::cycle {
namespace {

using namespace sched::testing;

std::shared_ptr<const queue::QueueTree> Queues(const cluster::Topology& t,
                                               const std::string& yaml) {
  auto specs = job::ParseQueues(yaml, "queues.yaml");
  EXPECT_TRUE(specs.ok()) << specs.status().ToString();
  auto tree = queue::QueueTree::Build(*specs, t);
  EXPECT_TRUE(tree.ok()) << tree.status().ToString();
  return *tree;
}

// One cycle's inputs: a leaf of `nodes` nodes of 8 GPUs, what runs and waits, and the Context
// the stages share.
struct Inputs {
  explicit Inputs(int nodes) : topo(Leaves(1, nodes)), work(topo) {}
  Context Of(const queue::QueueTree* tree, Time now = 0) {
    snap.usage = &work;
    snap.pending = pending;
    snap.running = running;
    snap.queues = tree;
    return {cfg, snap, now, order, tree, work, *topo, placer};
  }
  // Job `id` of `req` runs on all `gpus` GPUs of node `node`.
  RunningJob& Runs(JobId id, const GangRequest* req, uint32_t node, uint32_t gpus) {
    held.push_back(Hold(work, node, gpus));
    RunningJob& r = running.emplace_back();
    r.id = id;
    r.request = req;
    r.assignment = &held.back();
    return r;
  }
  std::shared_ptr<const cluster::Topology> topo;
  cluster::ClusterUsage work;
  SchedulerConfig cfg;
  std::vector<PendingJob> pending;
  std::vector<RunningJob> running;
  std::deque<cluster::GangAssignment> held;  // what `running` points to
  std::vector<uint32_t> order;
  Snapshot snap;
  placement::GangPlacer placer;
};

const char kTwoQueues[] =
    "queues:\n  - name: a\n    quota: {gpus: 4}\n    borrowing_limit: {gpus: 0}\n"
    "  - name: b\n    quota: {gpus: 4}\n";

TEST(QuotaAdmissionTest, ChargesWhatRunsAndForgetsVerdictsWhenTheLedgerMoves) {
  Inputs in(1);
  auto tree = Queues(*in.topo, kTwoQueues);
  const uint32_t a = static_cast<uint32_t>(tree->FindLeaf("a"));
  const GangRequest two = Whole(*in.topo, 1, 2);
  in.Runs(1, &two, 0, 2).queue = a;
  PendingJob p;
  p.id = 2;
  p.request = &two;
  p.queue = a;
  const Context c = in.Of(tree.get());
  QuotaAdmission admission(c);
  ASSERT_NE(admission.charge(0), nullptr);  // what runs is charged to its queue
  EXPECT_EQ(admission.Check(p, static_cast<int>(a)).verdict.kind, QuotaAdmission::Kind::kWithin);
  // Another 2 GPUs placed in a: its quota of 4 is full, and the kept verdict is not reused.
  cluster::GangAssignment placed;
  placed.grants.push_back({2, 1000, 0});
  placed.grants.push_back({3, 1000, 0});
  placed.tasks = {{0, 0, 0, 0, 0, 0, 2}};
  admission.Charge(static_cast<int>(a), two, placed);
  QuotaAdmission::Answer& denied = admission.Check(p, static_cast<int>(a));
  EXPECT_EQ(denied.verdict.kind, QuotaAdmission::Kind::kDenied);
  const std::string& words = admission.Detail(denied, static_cast<int>(a));
  EXPECT_NE(words.find("a"), std::string::npos) << words;
  EXPECT_EQ(&admission.Detail(admission.Check(p, static_cast<int>(a)), static_cast<int>(a)),
            &words);  // the same answer while the ledger holds still
  // The running job preempted: its charge leaves the queue, and the job fits again.
  EXPECT_TRUE(admission.Release(0));
  EXPECT_EQ(admission.Check(p, static_cast<int>(a)).verdict.kind, QuotaAdmission::Kind::kWithin);
}

TEST(FairShareOrderTest, TheQueueUsingLeastGoesFirstAndAChargeMovesIt) {
  Inputs in(1);
  auto tree = Queues(*in.topo, kTwoQueues);
  const uint32_t a = static_cast<uint32_t>(tree->FindLeaf("a"));
  const uint32_t b = static_cast<uint32_t>(tree->FindLeaf("b"));
  const GangRequest two = Whole(*in.topo, 1, 2);
  in.pending.resize(4);
  in.pending[0] = {1, &two, 0, job::Tier::kGuaranteed, a};
  in.pending[1] = {2, &two, 0, job::Tier::kGuaranteed, b};
  in.pending[2] = {3, &two, 0, job::Tier::kGuaranteed, a};
  in.pending[3] = {4, &two, 0, job::Tier::kGuaranteed, 99};  // no such queue: goes last
  in.order = {0, 1, 2, 3};
  const Context c = in.Of(tree.get());
  QuotaAdmission admission(c);
  FairShareOrder order(c, admission.ledger());
  std::vector<std::pair<uint32_t, bool>> left;
  order.ForEachLeft([&](uint32_t idx, bool head) { left.push_back({idx, head}); });
  EXPECT_EQ(left,
            (std::vector<std::pair<uint32_t, bool>>{{0, true}, {2, false}, {1, true}, {3, true}}));
  EXPECT_EQ(order.Next(), 0u);  // both queues idle: the first queue first
  // Job 1 placed in a: a now uses 2 GPUs and b none, so b's job goes next.
  admission.Charge(static_cast<int>(a), two, Hold(in.work, 0, 2));
  order.Stale(a);
  EXPECT_EQ(order.Next(), 1u);
  EXPECT_EQ(order.Next(), 2u);
  EXPECT_EQ(order.Next(), 3u);
  left.clear();
  order.ForEachLeft([&](uint32_t idx, bool head) { left.push_back({idx, head}); });
  EXPECT_TRUE(left.empty());
}

TEST(BackfillTest, TheFirstBlockedJobReservesAndLaterOnesMustEndBeforeIt) {
  Inputs in(2);
  const GangRequest eight = Whole(*in.topo, 1, 8), both = Whole(*in.topo, 2, 8);
  in.Runs(1, &eight, 0, 8).expected_end = 100;
  in.pending.resize(1);
  in.pending[0] = {2, &both};
  in.order = {0};
  auto scorer = std::move(placement::MakeScorer("hangar")).value();
  const placement::PlaceOptions opts{scorer.get()};
  {
    const Context c = in.Of(nullptr);
    Backfill backfill(c);
    EXPECT_TRUE(backfill.MayUseReserved(in.pending[0]));  // nothing reserved yet
    EXPECT_EQ(*backfill.Excluded(false), (std::vector<uint8_t>{0, 0}));
    std::vector<Reservation> made;
    backfill.Block(in.pending[0], opts, {}, nullptr, &made);
    ASSERT_EQ(made.size(), 1u);
    EXPECT_EQ(made[0].job, 2u);
    EXPECT_EQ(made[0].start, 100);  // when the running job ends
    EXPECT_TRUE(backfill.blocked() && backfill.reserved() && backfill.Settled());
    EXPECT_EQ(backfill.first_blocked(), 2u);
    EXPECT_EQ(*backfill.Excluded(false), (std::vector<uint8_t>{1, 1}));
    EXPECT_EQ(backfill.Excluded(true), nullptr);
    PendingJob shorter{3, &eight}, longer{4, &eight}, unbounded{5, &eight};
    shorter.time_limit = 50;
    longer.time_limit = 200;
    EXPECT_TRUE(backfill.MayUseReserved(shorter));
    EXPECT_FALSE(backfill.MayUseReserved(longer));
    EXPECT_FALSE(backfill.MayUseReserved(unbounded));  // no time limit: it may never end
  }
  // Strict order: the first blocked job holds everyone behind it, and reserves nothing.
  in.cfg.strict_order = true;
  const Context c = in.Of(nullptr);
  Backfill strict(c);
  std::vector<Reservation> made;
  strict.Block(in.pending[0], opts, {}, nullptr, &made);
  EXPECT_TRUE(made.empty());
  EXPECT_TRUE(strict.blocked() && !strict.reserved() && strict.Settled());
}

TEST(PreemptorTest, TakesAVictimItOutranksOnceAndSaysWhy) {
  Inputs in(1);
  const GangRequest eight = Whole(*in.topo, 1, 8);
  in.Runs(1, &eight, 0, 8).priority = 1;
  in.pending.resize(2);
  in.pending[0] = {2, &eight, 5};
  in.pending[1] = {3, &eight, 5};
  in.order = {0, 1};
  auto scorer = std::move(placement::MakeScorer("hangar")).value();
  const placement::PlaceOptions opts{scorer.get()};
  {
    const Context c = in.Of(nullptr);
    Preemptor none(c, nullptr, nullptr);  // the default mode preempts nobody
    EXPECT_TRUE(none.NoneFrom(0));
    Decisions out;
    EXPECT_FALSE(none.Try(in.pending[0], 0, -1, true, opts, &out));
    EXPECT_TRUE(out.preemptions.empty() && out.placements.empty());
  }
  in.cfg.preemption.mode = PreemptionMode::kPriority;
  const Context c = in.Of(nullptr, 10);
  Preemptor preemptor(c, nullptr, nullptr);
  EXPECT_FALSE(preemptor.NoneFrom(0));
  Decisions out;
  ASSERT_TRUE(preemptor.Try(in.pending[0], 0, -1, true, opts, &out));
  ASSERT_EQ(out.preemptions.size(), 1u);
  EXPECT_EQ(out.preemptions[0].victim, 1u);
  EXPECT_EQ(out.preemptions[0].for_job, 2u);
  EXPECT_NE(out.preemptions[0].why.find("job 2 (priority 5) outranks it (priority 1)"),
            std::string::npos)
      << out.preemptions[0].why;
  ASSERT_EQ(out.placements.size(), 1u);
  EXPECT_EQ(out.placements[0].preempted, std::vector<JobId>{1});
  // The victim is taken once: the next job of the same rank finds no one left to preempt.
  EXPECT_FALSE(preemptor.Try(in.pending[1], 1, -1, true, opts, &out));
  EXPECT_EQ(out.preemptions.size(), 1u);
}

TEST(PreemptorTest, UnderGittinsNoJobFromAPositionOnOutranksWhatRuns) {
  Inputs in(1);
  const GangRequest eight = Whole(*in.topo, 1, 8);
  in.Runs(1, &eight, 0, 8).rank = 500;
  in.pending.resize(3);
  in.pending[0] = {2, &eight};
  in.pending[0].rank = 100;  // outranks the running job
  in.pending[1] = {3, &eight};
  in.pending[1].rank = 900;
  in.pending[2] = {4, &eight};
  in.pending[2].rank = 700;
  in.order = {0, 1, 2};
  in.cfg.preemption.mode = PreemptionMode::kGittins;
  const Context c = in.Of(nullptr);
  Preemptor preemptor(c, nullptr, nullptr);
  EXPECT_FALSE(preemptor.NoneFrom(0));
  EXPECT_TRUE(preemptor.NoneFrom(1));
  EXPECT_TRUE(preemptor.NoneFrom(3));  // past the end
}

TEST(FailedShapesTest, RemembersByTheWholeKeyUntilForgotten) {
  FailedShapes failed;
  ShapeKey key{42, 3, -1, false};
  ShapeKey other = key;
  other.may_use_reserved = true;
  EXPECT_EQ(failed.Find(key), nullptr);
  Reason why;
  why.rule = Rule::kNotNowReserved;
  why.other = 7;
  failed.Remember(key, why);
  ASSERT_NE(failed.Find(key), nullptr);
  EXPECT_EQ(failed.Find(key)->other, 7u);
  EXPECT_EQ(failed.Find(other), nullptr);  // one field apart: another shape
  ASSERT_NE(failed.Find(key), nullptr);    // found again after another lookup
  failed.Forget();
  EXPECT_EQ(failed.Find(key), nullptr);
}

}  // namespace
}  // namespace hangar::sched::cycle
