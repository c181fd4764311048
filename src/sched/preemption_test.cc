#include "sched/preemption.h"

#include <gtest/gtest.h>

#include "sched/scheduler.h"
#include "sched/test_util.h"

namespace hangar::sched {
namespace {

using namespace sched::testing;

TEST(PreemptionTest, ServiceLevels) {
  std::vector<int64_t> t = {100, 1000};
  EXPECT_EQ(ServiceLevel(t, 0), 0);
  EXPECT_EQ(ServiceLevel(t, 99), 0);
  EXPECT_EQ(ServiceLevel(t, 100), 1);
  EXPECT_EQ(ServiceLevel(t, 5000), 2);
}

struct Fixture {
  std::shared_ptr<const cluster::Topology> topo = Leaves(1, 2);
  cluster::ClusterUsage usage{topo};
  std::vector<std::unique_ptr<cluster::GangAssignment>> assignments;
  std::vector<RunningJob> running;

  // Runs a job of `replicas` x 8 GPUs placed by the placer.
  void Run(JobId id, int replicas, int priority, job::Tier tier, Time start, Time checkpoint,
           Duration min_run = 0) {
    auto scorer = std::move(placement::MakeScorer("hangar")).value();
    placement::GangPlacer placer;
    placement::PlaceOptions o{scorer.get(), nullptr, nullptr, 1};
    static std::vector<std::unique_ptr<GangRequest>> reqs;
    reqs.push_back(std::make_unique<GangRequest>(Whole(*topo, replicas, 8)));
    auto r = placer.Place(usage, *reqs.back(), o);
    ASSERT_TRUE(r.placed);
    assignments.push_back(std::make_unique<cluster::GangAssignment>(r.assignment));
    RunningJob j;
    j.id = id;
    j.request = reqs.back().get();
    j.assignment = assignments.back().get();
    j.priority = priority;
    j.tier = tier;
    j.start = start;
    j.last_checkpoint = checkpoint;
    j.min_run_time = min_run;
    running.push_back(j);
  }
};

TEST(PreemptionTest, PicksTheVictimThatLosesTheLeastWork) {
  Fixture f;
  f.Run(1, 1, 0, job::Tier::kOpportunistic, 0, 0);    // 8 GPUs, no checkpoint for 1000 s
  f.Run(2, 1, 0, job::Tier::kOpportunistic, 0, 900);  // checkpointed 100 s ago
  GangRequest req = Whole(*f.topo, 1, 8);
  PendingJob job{10, &req, 5, job::Tier::kGuaranteed, 0, 1000, 0, 0, 10};
  PreemptionConfig cfg{PreemptionMode::kPriority};
  auto scorer = std::move(placement::MakeScorer("hangar")).value();
  placement::GangPlacer placer;
  placement::PlaceOptions o{scorer.get(), nullptr, nullptr, 1};
  std::vector<uint8_t> taken(2, 0);
  PreemptionPlan plan = PlanPreemption(cfg, f.usage, f.running, taken, job, placer, o, 1000);
  ASSERT_TRUE(plan.found);
  ASSERT_EQ(plan.victims.size(), 1u);
  EXPECT_EQ(f.running[plan.victims[0]].id, 2u);
  EXPECT_TRUE(plan.placement.placed);
}

TEST(PreemptionTest, GangsArePreemptedWholeAndYoungJobsAreSpared) {
  Fixture f;
  f.Run(1, 2, 0, job::Tier::kOpportunistic, 0, 0);  // a 2-node gang
  GangRequest req = Whole(*f.topo, 1, 4);
  PendingJob job{10, &req, 5, job::Tier::kGuaranteed, 0, 100, 0, 0, 10};
  PreemptionConfig cfg{PreemptionMode::kPriority};
  auto scorer = std::move(placement::MakeScorer("hangar")).value();
  placement::GangPlacer placer;
  placement::PlaceOptions o{scorer.get(), nullptr, nullptr, 1};
  std::vector<uint8_t> taken(1, 0);
  PreemptionPlan plan = PlanPreemption(cfg, f.usage, f.running, taken, job, placer, o, 100);
  ASSERT_TRUE(plan.found);
  EXPECT_EQ(plan.victims.size(), 1u);
  // The whole gang was released, not half of it: 16 GPUs free before the job took 4.
  EXPECT_EQ(f.usage.TotalFreeWholeGpus(), 12);

  Fixture young;
  young.Run(1, 2, 0, job::Tier::kOpportunistic, 0, 0, /*min_run=*/600);
  std::vector<uint8_t> taken2(1, 0);
  EXPECT_FALSE(PlanPreemption(cfg, young.usage, young.running, taken2, job, placer, o, 100).found);
  EXPECT_EQ(young.usage.TotalFreeWholeGpus(), 0);
  EXPECT_TRUE(PlanPreemption(cfg, young.usage, young.running, taken2, job, placer, o, 700).found);
}

TEST(PreemptionTest, NoVictimsTheJobDoesNotOutrank) {
  Fixture f;
  f.Run(1, 2, 9, job::Tier::kGuaranteed, 0, 0);
  GangRequest req = Whole(*f.topo, 1, 8);
  PendingJob job{10, &req, 5, job::Tier::kGuaranteed, 0, 100, 0, 0, 10};
  PreemptionConfig cfg{PreemptionMode::kPriority};
  auto scorer = std::move(placement::MakeScorer("hangar")).value();
  placement::GangPlacer placer;
  placement::PlaceOptions o{scorer.get(), nullptr, nullptr, 1};
  std::vector<uint8_t> taken(1, 0);
  EXPECT_FALSE(PlanPreemption(cfg, f.usage, f.running, taken, job, placer, o, 100).found);
}

TEST(PreemptionTest, LasCycleNamesTheVictimAndWhy) {
  auto t = Leaves(1, 1);
  SchedulerConfig cfg;
  cfg.queue_policy = "las";
  cfg.preemption.mode = PreemptionMode::kLas;
  cfg.preemption.las_thresholds = {1000 * 1000};
  MiniCluster c(t, cfg);
  JobId old = c.Submit(Whole(*t, 1, 8), 0, 1'000'000);
  c.Step(0);
  ASSERT_TRUE(c.IsRunning(old));
  // The running job is credited 8 GPUs x 500 s = 4,000 GPU-s: level 1. A new job is level 0.
  JobId fresh = c.Submit(Whole(*t, 1, 8), 400'000, 10);
  Decisions d = c.Step(500'000);
  ASSERT_EQ(d.preemptions.size(), 1u);
  EXPECT_EQ(d.preemptions[0].victim, old);
  EXPECT_EQ(d.preemptions[0].for_job, fresh);
  EXPECT_EQ(d.preemptions[0].why, "job 2 has received less service (level 0 vs 1)");
  ASSERT_EQ(d.placements.size(), 1u);
  EXPECT_EQ(d.placements[0].preempted, std::vector<JobId>{old});
}

TEST(PreemptionTest, GittinsTakesTheHighestRankFirst) {
  Fixture f;
  f.Run(1, 1, 0, job::Tier::kGuaranteed, 0, 0);
  f.running.back().rank = 500;
  f.Run(2, 1, 0, job::Tier::kGuaranteed, 0, 0);
  f.running.back().rank = 900;
  GangRequest req = Whole(*f.topo, 1, 8);
  PendingJob job{10, &req, 0, job::Tier::kGuaranteed, 0, 100, 0, 0, 10};
  PreemptionConfig cfg{PreemptionMode::kGittins};
  auto scorer = std::move(placement::MakeScorer("hangar")).value();
  placement::GangPlacer placer;
  placement::PlaceOptions o{scorer.get(), nullptr, nullptr, 1};
  std::vector<uint8_t> taken(2, 0);
  job.rank = 950;  // outranks neither
  EXPECT_FALSE(PlanPreemption(cfg, f.usage, f.running, taken, job, placer, o, 100).found);
  job.rank = 600;  // outranks job 2 only
  PreemptionPlan plan = PlanPreemption(cfg, f.usage, f.running, taken, job, placer, o, 100);
  ASSERT_TRUE(plan.found);
  ASSERT_EQ(plan.victims.size(), 1u);
  EXPECT_EQ(f.running[plan.victims[0]].id, 2u);
}

TEST(PreemptionTest, GittinsMarginAsksForAClearlyMoreUrgentJob) {
  Fixture f;
  f.Run(1, 1, 0, job::Tier::kGuaranteed, 0, 0);
  f.running.back().rank = 900;
  GangRequest req = Whole(*f.topo, 1, 8);
  PendingJob job{10, &req, 0, job::Tier::kGuaranteed, 0, 100, 0, 0, 10};
  PreemptionConfig cfg{PreemptionMode::kGittins};
  cfg.gittins_margin = 3.0;
  job.rank = 600;  // lower, but not a third of 900
  EXPECT_FALSE(Outranks(cfg, job, f.running[0], 100));
  job.rank = 299;
  EXPECT_TRUE(Outranks(cfg, job, f.running[0], 100));
  cfg.gittins_margin = 1.0;
  job.rank = 600;
  EXPECT_TRUE(Outranks(cfg, job, f.running[0], 100));
}

TEST(PreemptionTest, GittinsCycleStopsOnceNothingLeftCanStart) {
  Fixture f;
  f.Run(1, 1, 0, job::Tier::kGuaranteed, 0, 0);
  f.running.back().rank = 500'000;
  f.Run(2, 1, 0, job::Tier::kGuaranteed, 0, 0);
  f.running.back().rank = 900'000;
  GangRequest req = Whole(*f.topo, 1, 8);
  std::vector<PendingJob> pending(3);
  for (uint64_t i = 0; i < 3; ++i)
    pending[i] = {10 + i, &req, 0, job::Tier::kGuaranteed, 0, 100, 0, 0, 10 + i};
  pending[0].rank = 100'000;
  pending[1].rank = 1'000'000;
  pending[2].rank = 2'000'000;
  SchedulerConfig cfg;
  cfg.queue_policy = "gittins";
  cfg.backfill = BackfillMode::kNone;
  cfg.preemption.mode = PreemptionMode::kGittins;
  auto sched = std::move(Scheduler::Create(cfg)).value();
  Snapshot snap;
  snap.usage = &f.usage;
  snap.pending = pending;
  snap.running = f.running;
  snap.cpu_only_pending = 0;
  Decisions d = sched->Cycle(snap, 100);
  ASSERT_EQ(d.preemptions.size(), 1u);
  EXPECT_EQ(d.preemptions[0].victim, 2u);
  EXPECT_EQ(d.preemptions[0].why,
            "job 10 is expected to need less GPU time per completion (rank 100 vs 900 GPU-s)");
  // The cluster is full again and jobs 11 and 12 outrank nobody: neither is looked at.
  EXPECT_EQ(d.examined, 1u);
  EXPECT_EQ(d.not_examined.rule, Rule::kNotNowNotExamined);
  EXPECT_TRUE(d.waiting.empty());
}

}  // namespace
}  // namespace hangar::sched
