#include "sim/services/services_run.h"

#include <gtest/gtest.h>

namespace hangar::sim {
namespace {

// 4 nodes of 8 GPUs. The fleet: 1-GPU replicas of 10 rps, 2 to 16 (its 16 GPUs: 2 nodes), 20 rps
// until noon, 160 rps after. Training: four 8-GPU jobs of 20 hours at 00:01.
ServicesScenario Scenario(SurgeTier surge) {
  ServicesScenario s;
  s.from = 17 * kDay;  // a midnight
  s.span = kDay;
  s.lead = 0;
  s.nodes = 4;
  s.fleet.rps_per_replica = 10;
  s.fleet.min_replicas = 2;
  s.fleet.max_replicas = 16;
  s.fleet.warmup = 0;
  s.fleet.surge = surge;
  std::vector<double> rates(24, 20);
  for (int h = 12; h < 24; ++h) rates[h] = 160;
  s.fleet.demand = DemandCurve::Hourly(rates);
  for (int i = 0; i < 4; ++i) {
    TraceJob t;
    t.row = static_cast<uint64_t>(i) + 1;
    t.submit = s.from + kMinute;
    t.runtime = 20 * kHour;
    t.gpus_per_replica = 8;
    s.trace.push_back(t);
  }
  return s;
}

constexpr double kH = 3600;

// Static: training has 2 nodes, so two jobs run 00:01-20:01 and two 20:01-40:01; the fleet's own
// nodes hold every replica it wants.
TEST(ServicesRunTest, StaticPartitionServesEverythingAndQueuesTraining) {
  auto r = RunServices(Scenario(SurgeTier::kReclaim), FleetLayout::kStatic);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->fleet_gpus, 16);
  EXPECT_EQ(r->training_gpus, 16);
  EXPECT_EQ(r->training.jobs, 4);
  EXPECT_EQ(r->training.unfinished, 0);
  EXPECT_DOUBLE_EQ(r->training.mean_jct_s, 30 * kH);
  EXPECT_DOUBLE_EQ(r->training.p95_jct_s, 40 * kH);
  EXPECT_EQ(r->training.preemptions, 0);
  EXPECT_NEAR(r->fleet.demand_rps_s, (20.0 * 12 + 160.0 * 12) * kH, 1e-6);
  EXPECT_EQ(r->fleet.unserved_rps_s, 0);
  EXPECT_EQ(r->fleet.peak_replicas, 16);
}

// Shared, surge replicas reclaiming: until noon training borrows the fleet's idle node (three jobs
// run); at noon the fleet takes it back by preempting one borrowed job, which resumes at 20:01
// with 8h01m left plus its 30 s restore. Nothing goes unserved, and training finishes sooner.
TEST(ServicesRunTest, SharedFleetLendsIdleGpusToTrainingAndReclaimsThem) {
  auto r = RunServices(Scenario(SurgeTier::kReclaim), FleetLayout::kShared);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->training.unfinished, 0);
  EXPECT_EQ(r->training.preemptions, 1);
  EXPECT_EQ(r->fleet.unserved_rps_s, 0);
  EXPECT_EQ(r->fleet.replicas_preempted, 0);
  EXPECT_EQ(r->fleet.peak_replicas, 16);
  const double resumed = 20 * kH + 8 * kH + 60 + 30;  // 00:01 -> 04:02:30 the next day
  EXPECT_DOUBLE_EQ(r->training.mean_jct_s, (20 * kH + 20 * kH + resumed + 40 * kH) / 4);
}

// Shared, surge replicas opportunistic (as the controller runs them): they take only free GPUs,
// so at noon 8 of the 14 new replicas wait for the borrowed node until the training jobs end at
// 20:01, and 80 rps go unserved meanwhile.
TEST(ServicesRunTest, OpportunisticSurgeReplicasWaitForBorrowedGpus) {
  auto r = RunServices(Scenario(SurgeTier::kOpportunistic), FleetLayout::kShared);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->training.preemptions, 0);
  EXPECT_NEAR(r->fleet.unserved_rps_s, 80.0 * (8 * kH + 60), 1e-6);
  EXPECT_NEAR(r->fleet.under_fraction(), (8 * kH + 60) / (24 * kH), 1e-12);
}

}  // namespace
}  // namespace hangar::sim
