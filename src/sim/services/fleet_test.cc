#include "sim/services/fleet.h"

#include <gtest/gtest.h>

#include "sim/engine/simulator.h"
#include "sim/replay/replay.h"

namespace hangar::sim {
namespace {

// One 8-GPU node, replicas of 1 GPU serving 10 rps each, 1 to 8 of them; 10 rps all day but
// 50 rps from 01:00 to 02:00.
ServingFleetSpec StepFleet() {
  ServingFleetSpec f;
  f.rps_per_replica = 10;
  f.min_replicas = 1;
  f.max_replicas = 8;
  f.warmup = 5 * kMinute;
  f.interval = kMinute;
  f.scale_down_after = 10 * kMinute;
  std::vector<double> rates(24, 10);
  rates[1] = 50;
  f.demand = DemandCurve::Hourly(rates);
  return f;
}

struct Served {
  FleetLedger ledger;
  std::vector<SimJobResult> results;
};

Served Serve(const ServingFleetSpec& f, int gpus) {
  auto sim = std::move(Simulator::Create(UniformCluster("n", 1, gpus), {})).value();
  std::vector<size_t> jobs;
  for (int k = 0; k < f.max_replicas; ++k) {
    sched::TaskShape s;
    s.kind = job::GpuKind::kWhole;
    s.gpus = 1;
    s.milli = 1000;
    SimJob j;
    j.id = static_cast<uint64_t>(k) + 1;
    j.name = "replica-" + std::to_string(k);
    j.request = std::make_shared<sched::GangRequest>(sched::MakeSingleTaskRequest(s));
    j.submit = kNever;
    j.runtime = kMaxDuration;
    sim->AddJob(std::move(j));
    jobs.push_back(static_cast<size_t>(k));
  }
  // It scales from an hour before the measured day, so its first replica is ready at 00:00.
  ServingFleet fleet(f, jobs, {-kHour, 0, kDay, kNever});
  fleet.OthersDone();
  SimObserver obs;
  obs.on_start = [&](Time t, const SimJob& j, const sched::Placement&) {
    fleet.OnStart(t, j.id - 1);
  };
  sim->set_observer(std::move(obs));
  sim->set_disruptor(&fleet);
  EXPECT_TRUE(sim->Run().ok());
  EXPECT_TRUE(fleet.stopped());
  return {fleet.ledger(), sim->results()};
}

// Worked by hand. At 01:00 the autoscaler wants 5 replicas; the 4 new ones serve from 01:05, so
// 40 rps go unserved for 5 minutes (12,000 requests). At 02:00 it wants 1 again, but scales in
// only at 02:10, when the last 10 minutes' recommendations were all lower.
TEST(ServingFleetTest, ScalesToTheCurveAndBooksWhatWarmingReplicasCouldNotServe) {
  const Served r = Serve(StepFleet(), 8);
  const FleetLedger& l = r.ledger;
  EXPECT_EQ(l.span, kDay);
  EXPECT_NEAR(l.demand_rps_s, 10.0 * 86400 + 40.0 * 3600, 1e-6);
  EXPECT_NEAR(l.unserved_rps_s, 40.0 * 300, 1e-6);
  EXPECT_EQ(l.under_demand, 5 * kMinute);
  EXPECT_EQ(l.scale_outs, 1);  // 1 -> 5 at 01:00 (0 -> 1 was before the day)
  EXPECT_EQ(l.scale_ins, 1);   // 5 -> 1 at 02:10
  EXPECT_EQ(l.peak_replicas, 5);
  EXPECT_EQ(l.replica_starts, 4);
  // 1 replica all day and 4 more from 01:00 to 02:10.
  EXPECT_NEAR(l.wanted_replica_s, 86400.0 + 4 * 4200, 1e-6);
  EXPECT_NEAR(l.replica_gpu_s, 86400.0 + 4 * 4200, 1e-6);
  EXPECT_NEAR(l.unserved_fraction(), 12000.0 / (864000 + 144000), 1e-12);
}

// With 3 GPUs only 3 replicas fit: from 01:05 to 02:00, 20 rps find no replica, beside the 40
// rps of the first 5 minutes.
TEST(ServingFleetTest, ReplicasThatFindNoGpuLeaveDemandUnserved) {
  const Served r = Serve(StepFleet(), 3);
  EXPECT_NEAR(r.ledger.unserved_rps_s, 40.0 * 300 + 20.0 * 3300, 1e-6);
  EXPECT_EQ(r.ledger.under_demand, kHour);
  EXPECT_EQ(r.ledger.peak_replicas, 3);
  // The two that never started were withdrawn, not left waiting for ever.
  for (const auto& res : r.results) EXPECT_FALSE(res.never);
}

}  // namespace
}  // namespace hangar::sim
