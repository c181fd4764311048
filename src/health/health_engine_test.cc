// The scenarios the health rules must get right, end to end through the engine, with explicit
// times (no clocks, no sleeps).
#include "health/health_engine.h"

#include <gtest/gtest.h>

#include "health/health_test_fleet.h"

namespace hangar::health {
namespace {

using namespace ::hangar::health::testing;

using ::hangar::cluster::NodeCondition;

GpuSample Sample(uint16_t gpu, Time at) {
  GpuSample s;
  s.index = gpu;
  s.at = at;
  s.util_pct = 95;
  s.pcie_gen = s.pcie_gen_max = 5;
  s.pcie_width = s.pcie_width_max = 16;
  return s;
}

ValidationReport Passing(Time at, int gpus = 8, double gemm = 700) {
  ValidationReport r;
  r.at = at;
  for (int i = 0; i < gpus; ++i) r.gpus.push_back({static_cast<uint16_t>(i), gemm, 3000, 50, 50});
  r.nccl_busbw_gbs = 450;
  return r;
}

TEST(HealthEngineTest, Xid79DrainsTheWholeNodeAtOnceWithTheReason) {
  HealthEngine e(Fleet(4), InPool(), 0);
  ASSERT_TRUE(e.ObserveGpuEvent(3, Xid(2, 79, 1000)).ok());
  Evaluation ev = e.Evaluate(1000);
  EXPECT_EQ(e.node_state(3), HealthState::kDraining);
  EXPECT_EQ(ev.drain_nodes, std::vector<uint32_t>{3});
  EXPECT_TRUE(ev.drain_gpus.empty());
  ASSERT_EQ(ev.transitions.size(), 1u);
  EXPECT_EQ(ev.transitions[0].ToString("node-3"),
            "node-3: healthy -> draining: xid_79: Xid 79 on GPU 2 (GPU fell off the bus)");
  ASSERT_EQ(ev.changed.size(), 1u);
  const NodeReport& rep = ev.changed[0];
  EXPECT_FALSE(rep.condition.schedulable);
  ASSERT_EQ(rep.conditions.size(), 1u);
  EXPECT_EQ(rep.conditions[0].severity(), Severity::kFatal);
  EXPECT_EQ(rep.conditions[0].action, RecommendedAction::kDrainNodeAndReboot);
  EXPECT_EQ(rep.conditions[0].gpu, 2);
  EXPECT_EQ(rep.transitions.size(), 1u);
  EXPECT_EQ(e.node_state(2), HealthState::kHealthy);  // the others are untouched
}

TEST(HealthEngineTest, PcieLinkDownTrainedMakesTheGpuSuspect) {
  HealthEngine e(Fleet(2), InPool(), 0);
  GpuSample s = Sample(1, 1000);
  s.pcie_gen = 3;
  s.pcie_width = 4;
  ASSERT_TRUE(e.ObserveGpu(0, s).ok());
  Evaluation ev = e.Evaluate(1000);
  EXPECT_EQ(e.gpu_state(1), HealthState::kSuspect);
  ASSERT_EQ(ev.transitions.size(), 1u);
  EXPECT_EQ(ev.transitions[0].ToString("node-0"),
            "node-0 GPU 1: healthy -> suspect: pcie_link_degraded: PCIe Gen5 x16 → Gen3 x4 on "
            "GPU 1: the link trained below its maximum");
  // Still schedulable, ranked last.
  EXPECT_EQ(e.node_condition(0), (NodeCondition{true, true, 1, 0}));
  EXPECT_TRUE(e.gpu_available(1));
  // The link retrains at full width: back to healthy (it never left the pool).
  ASSERT_TRUE(e.ObserveGpu(0, Sample(1, 2000)).ok());
  e.Evaluate(2000);
  EXPECT_EQ(e.gpu_state(1), HealthState::kHealthy);
  EXPECT_EQ(e.node_condition(0), NodeCondition{});
}

TEST(HealthEngineTest, GpuAtSeventyPercentOfTheFleetMedianIsDegraded) {
  HealthEngine e(Fleet(4), HealthOptions{}, 0);  // nodes start pending validation
  EXPECT_FALSE(e.node_condition(0).schedulable);
  for (uint32_t n = 0; n < 3; ++n) ASSERT_TRUE(e.ObserveValidation(n, Passing(1000)).ok());
  ValidationReport slow = Passing(1000);
  slow.gpus[5].gemm_tflops = 490;
  ASSERT_TRUE(e.ObserveValidation(3, slow).ok());
  Evaluation ev = e.Evaluate(1000);
  EXPECT_EQ(e.node_state(3), HealthState::kHealthy);  // the node passed
  EXPECT_EQ(e.gpu_state(3 * 8 + 5), HealthState::kDegraded);
  EXPECT_TRUE(e.gpu_available(3 * 8 + 5));
  NodeCondition c = e.node_condition(3);
  EXPECT_TRUE(c.schedulable);
  EXPECT_FALSE(c.gangs_allowed);  // a gang is as slow as its slowest GPU
  EXPECT_EQ(c.penalty, 2);
  EXPECT_EQ(c.band, 2);
  EXPECT_EQ(e.node_condition(0), NodeCondition{});
  NodeReport rep = e.Report(3);
  ASSERT_EQ(rep.gpus[5].conditions.size(), 1u);
  EXPECT_EQ(rep.gpus[5].conditions[0].type, "validation_outlier");
  EXPECT_EQ(ev.transitions.size(), 5u);  // four nodes pending -> healthy, one GPU degraded
  // A later run at full speed clears it.
  ASSERT_TRUE(e.ObserveValidation(3, Passing(5000)).ok());
  e.Evaluate(5000);
  EXPECT_EQ(e.gpu_state(3 * 8 + 5), HealthState::kHealthy);
  EXPECT_EQ(e.node_condition(3), NodeCondition{});
}

// The node's own all-reduce is an outlier too (it runs at its slowest GPU's pace): the node leaves
// pending validation degraded -- it does not wait for a validation it can never pass.
TEST(HealthEngineTest, NodeWhoseAllReduceIsAnOutlierComesInDegradedNotStuckPending) {
  HealthEngine e(Fleet(4), HealthOptions{}, 0);
  for (uint32_t n = 0; n < 3; ++n) ASSERT_TRUE(e.ObserveValidation(n, Passing(1000)).ok());
  ValidationReport slow = Passing(1000);
  slow.gpus[6].gemm_tflops = 490;
  slow.nccl_busbw_gbs = 0.7 * 450;
  ASSERT_TRUE(e.ObserveValidation(3, slow).ok());
  Evaluation ev = e.Evaluate(1000);
  EXPECT_EQ(e.node_state(3), HealthState::kDegraded);
  EXPECT_FALSE(e.Report(3).needs_validation);
  EXPECT_TRUE(e.Evaluate(2000).validate_nodes.empty());  // nothing more to ask
  NodeCondition c = e.node_condition(3);
  EXPECT_TRUE(c.schedulable);
  EXPECT_FALSE(c.gangs_allowed);
  std::string reason;
  for (const auto& t : ev.transitions) {
    if (t.node == 3 && t.gpu < 0) reason = t.ToString("node-3");
  }
  EXPECT_NE(
      reason.find("pending_validation -> degraded: validation done, with findings; still "
                  "validation_outlier: NCCL nccl_busbw_gbs 315.0 GB/s is 30.0% below the fleet "
                  "median"),
      std::string::npos)
      << reason;
  // A clean run brings it back to healthy.
  ASSERT_TRUE(e.ObserveValidation(3, Passing(5000)).ok());
  e.Evaluate(5000);
  EXPECT_EQ(e.node_state(3), HealthState::kHealthy);
  EXPECT_EQ(e.node_condition(3), NodeCondition{});
}

// A floor failure is fatal: the node stays out of the pool.
TEST(HealthEngineTest, NodeBelowTheNcclFloorDoesNotLeavePendingValidation) {
  HealthEngine e(Fleet(1), HealthOptions{}, 0);
  ValidationReport bad = Passing(1000);
  bad.nccl_busbw_gbs = 10;  // below the floor (150 GB/s on NVLink, 15 GB/s over PCIe)
  ASSERT_TRUE(e.ObserveValidation(0, bad).ok());
  e.Evaluate(1000);
  EXPECT_FALSE(IsSchedulable(e.node_state(0)));
  EXPECT_FALSE(e.node_condition(0).schedulable);
}

TEST(HealthEngineTest, Xid13OnceIsNothingTwiceInADayIsSuspectADayApartIsNothing) {
  HealthEngine e(Fleet(1), InPool(), 0);
  ASSERT_TRUE(e.ObserveGpuEvent(0, Xid(0, 13, 0)).ok());
  Evaluation once = e.Evaluate(0);
  EXPECT_EQ(e.gpu_state(0), HealthState::kHealthy);
  EXPECT_TRUE(once.transitions.empty());
  EXPECT_TRUE(once.validate_nodes.empty());
  ASSERT_EQ(e.Report(0).gpus[0].conditions.size(), 1u);
  EXPECT_EQ(e.Report(0).gpus[0].conditions[0].severity(), Severity::kInfo);

  ASSERT_TRUE(e.ObserveGpuEvent(0, Xid(0, 13, 5 * kHour)).ok());
  Evaluation twice = e.Evaluate(5 * kHour);
  EXPECT_EQ(e.gpu_state(0), HealthState::kSuspect);
  EXPECT_EQ(twice.validate_nodes, std::vector<uint32_t>{0});
  EXPECT_EQ(e.node_condition(0).penalty, 1);

  // Another GPU: two Xid 13s 25 hours apart stay informational.
  ASSERT_TRUE(e.ObserveGpuEvent(0, Xid(1, 13, 10 * kHour)).ok());
  e.Evaluate(10 * kHour);
  ASSERT_TRUE(e.ObserveGpuEvent(0, Xid(1, 13, 35 * kHour)).ok());
  Evaluation apart = e.Evaluate(35 * kHour);
  EXPECT_EQ(e.gpu_state(1), HealthState::kHealthy);
  EXPECT_TRUE(apart.validate_nodes.empty());
}

TEST(HealthEngineTest, DoubleBitEccDrainsTheGpuNotTheNode) {
  HealthEngine e(Fleet(2), InPool(), 0);
  GpuSample s = Sample(4, 1000);
  s.ecc_dbe_volatile = 1;
  ASSERT_TRUE(e.ObserveGpu(1, s).ok());
  Evaluation ev = e.Evaluate(1000);
  EXPECT_EQ(e.gpu_state(8 + 4), HealthState::kDraining);
  EXPECT_FALSE(e.gpu_available(8 + 4));
  EXPECT_EQ(ev.drain_gpus, std::vector<uint32_t>{8 + 4});
  EXPECT_TRUE(ev.drain_nodes.empty());
  EXPECT_EQ(e.node_state(1), HealthState::kHealthy);
  EXPECT_TRUE(e.node_condition(1).schedulable);
  EXPECT_TRUE(e.node_condition(1).gangs_allowed);
  EXPECT_EQ(ev.transitions[0].reason,
            "ecc_dbe: GPU 4: 1 volatile double-bit ECC errors since its last reset");
}

TEST(HealthEngineTest, InfiniBandLinkDownedIsFatalForTheNode) {
  HealthEngine e(Fleet(2), InPool(), 0);
  IbPortSample p;
  p.device = "mlx5_3";
  p.port = 1;
  p.state = "4: ACTIVE";
  p.at = 1000;
  p.counters = {{"link_downed", 2}, {"symbol_error", 0}};
  ASSERT_TRUE(e.ObserveIbPort(0, p).ok());
  e.Evaluate(1000);
  EXPECT_EQ(e.node_state(0), HealthState::kHealthy);  // a baseline, however high
  p.at = 2000;
  p.counters["link_downed"] = 3;
  ASSERT_TRUE(e.ObserveIbPort(0, p).ok());
  Evaluation ev = e.Evaluate(2000);
  EXPECT_EQ(e.node_state(0), HealthState::kDraining);
  EXPECT_EQ(ev.drain_nodes, std::vector<uint32_t>{0});
  EXPECT_EQ(ev.transitions[0].reason,
            "ib_link_downed: InfiniBand mlx5_3 port 1: link_downed rose by 1 to 3 (any increase "
            "is fatal)");
}

TEST(HealthEngineTest, CounterResetsAreNotFaults) {
  HealthEngine e(Fleet(1), InPool(), 0);
  IbPortSample p;
  p.device = "mlx5_0";
  p.state = "4: ACTIVE";
  p.at = 1000;
  p.counters = {{"link_downed", 9}, {"symbol_error", 60000}, {"port_rcv_errors", 500}};
  ASSERT_TRUE(e.ObserveIbPort(0, p).ok());
  GpuSample s = Sample(0, 1000);
  s.pcie_replay_count = 100000;
  s.thermal_violation_ms = 5'000'000;
  ASSERT_TRUE(e.ObserveGpu(0, s).ok());
  // The node rebooted: every counter restarted near zero.
  p.at = s.at = 61'000;
  p.counters = {{"link_downed", 0}, {"symbol_error", 1}, {"port_rcv_errors", 0}};
  s.pcie_replay_count = 2;
  s.thermal_violation_ms = 0;
  ASSERT_TRUE(e.ObserveIbPort(0, p).ok());
  ASSERT_TRUE(e.ObserveGpu(0, s).ok());
  Evaluation ev = e.Evaluate(61'000);
  EXPECT_TRUE(ev.transitions.empty());
  EXPECT_EQ(e.node_state(0), HealthState::kHealthy);
  EXPECT_EQ(e.gpu_state(0), HealthState::kHealthy);
  // And a real increase after the reset is still caught.
  p.at = 62'000;
  p.counters["link_downed"] = 1;
  ASSERT_TRUE(e.ObserveIbPort(0, p).ok());
  e.Evaluate(62'000);
  EXPECT_EQ(e.node_state(0), HealthState::kDraining);
}

}  // namespace
}  // namespace hangar::health
