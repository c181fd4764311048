// `hangar sim goodput`'s scenario end to end, small: a 64-GPU training job beside a few nodes of
// other jobs, failures at many times Llama 3's rate.
#include "sim/goodput_run.h"

#include <gtest/gtest.h>

namespace hangar::sim {
namespace {

GoodputScenario Small() {
  GoodputScenario s;
  s.start = 0;
  s.job_gpus = 64;  // 8 nodes
  s.work = 2 * kDay;
  s.trace_nodes = 4;
  s.spares = 2;
  s.nodes_per_leaf = 4;
  s.leaves_per_spine = 2;
  // About 5 interruptions a day for the job; nodes repaired in 2 hours, so that few are out at
  // once.
  s.loop.rates = ScaledRates(Llama3Rates(), 200);
  for (auto& k : s.loop.rates.kinds) {
    if (k.repair > 0) k.repair = 2 * kHour;
  }
  s.loop.checkpoint_interval = 30 * kMinute;
  // Other jobs keep the other nodes busy: an 8-GPU job every 30 minutes, each running 3 hours.
  for (int i = 0; i < 96; ++i) {
    TraceJob t;
    t.row = static_cast<uint64_t>(i + 1);
    t.submit = i * 30 * kMinute;
    t.runtime = 3 * kHour;
    t.gpus_per_replica = 8;
    s.trace.push_back(t);
  }
  return s;
}

GoodputOutcome RunPolicy(RecoveryPolicy p, uint64_t seed) {
  GoodputScenario s = Small();
  s.loop.policy = p;
  s.loop.seed = seed;
  auto topo = GoodputCluster(s);
  EXPECT_TRUE(topo.ok());
  auto r = RunGoodput(s, *topo);
  EXPECT_TRUE(r.ok()) << r.status().message();
  return *r;
}

TEST(GoodputRunTest, SparesBeatHoldingAndRequeueingOnTheSameFailures) {
  const GoodputOutcome spares = RunPolicy(RecoveryPolicy::kSpares, 5);
  const GoodputOutcome hold = RunPolicy(RecoveryPolicy::kNoSpares, 5);
  const GoodputOutcome naive = RunPolicy(RecoveryPolicy::kNaive, 5);
  for (const GoodputOutcome* r : {&spares, &hold, &naive}) {
    EXPECT_TRUE(r->ledger.done());
    EXPECT_GT(r->ledger.interruptions(), 5);
    EXPECT_EQ(r->other_jobs, 96);
    EXPECT_GT(r->ledger.Ettr(r->job_end), 0.3);
    EXPECT_LT(r->ledger.Ettr(r->job_end), 1.0);
  }
  EXPECT_GT(spares.counts.spares_taken, 0);
  EXPECT_GT(spares.ledger.Ettr(spares.job_end), hold.ledger.Ettr(hold.job_end));
  EXPECT_GT(spares.ledger.Ettr(spares.job_end), naive.ledger.Ettr(naive.job_end));
  EXPECT_GT(hold.ledger.down(DownCause::kWaitForNode), 0);
  EXPECT_GT(naive.ledger.down(DownCause::kQueue), 0);
  EXPECT_EQ(spares.ledger.down(DownCause::kQueue), 0);
  // With spares the job loses little beyond the bound on the failures it met.
  const double same = SameFailuresBound(spares, 30 * kMinute, Small().loop.restore);
  EXPECT_GT(spares.ledger.Ettr(spares.job_end), same - 0.03);
}

TEST(GoodputRunTest, TheSameSeedGivesTheSameRun) {
  const GoodputOutcome a = RunPolicy(RecoveryPolicy::kSpares, 9),
                       b = RunPolicy(RecoveryPolicy::kSpares, 9);
  EXPECT_EQ(a.job_end, b.job_end);
  EXPECT_EQ(a.ledger.lost_work(), b.ledger.lost_work());
  EXPECT_EQ(a.avg_jct_s, b.avg_jct_s);
}

TEST(GoodputRunTest, SparesSpreadOverTheLeaves) {
  GoodputScenario s = Small();
  s.spares = 3;
  auto topo = GoodputCluster(s);
  ASSERT_TRUE(topo.ok());
  ASSERT_EQ((*topo)->nodes().size(), 15u);  // leaves of 4: 4, 4, 4, 3
  EXPECT_EQ(SparePositions(**topo, 3), (std::vector<uint32_t>{3, 7, 11}));
  EXPECT_EQ(SparePositions(**topo, 5), (std::vector<uint32_t>{2, 3, 7, 11, 14}));
}

TEST(GoodputRunTest, AJobThatIsNotWholeNodesIsRefused) {
  GoodputScenario s = Small();
  s.job_gpus = 60;
  EXPECT_FALSE(GoodputCluster(s).ok());
}

}  // namespace
}  // namespace hangar::sim
