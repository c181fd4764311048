// Lifecycle scenarios through the engine: the fleet safety valve, recovery through remediation
// and validation, failure after repeated faults, lost nodes, configuration drift, restarts.
#include <gtest/gtest.h>

#include "health/health_engine.h"
#include "health/health_test_fleet.h"

namespace hangar::health {
namespace {

using namespace ::hangar::health::testing;

using ::hangar::cluster::NodeCondition;
using Kind = OperatorAction::Kind;

GpuSample Sample(uint16_t gpu, Time at) {
  GpuSample s;
  s.index = gpu;
  s.at = at;
  s.util_pct = 95;
  s.pcie_gen = s.pcie_gen_max = 5;
  s.pcie_width = s.pcie_width_max = 16;
  return s;
}

ValidationReport Passing(Time at, int gpus = 8) {
  ValidationReport r;
  r.at = at;
  for (int i = 0; i < gpus; ++i) r.gpus.push_back({static_cast<uint16_t>(i), 700, 3000, 50, 50});
  r.nccl_busbw_gbs = 450;
  return r;
}

OperatorAction Act(Kind kind, uint32_t node, int gpu, Time at, Remedy remedy = Remedy::kGpuReset,
                   std::string note = "") {
  OperatorAction a;
  a.kind = kind;
  a.node = node;
  a.gpu = gpu;
  a.at = at;
  a.remedy = remedy;
  a.note = std::move(note);
  return a;
}

TEST(HealthLifecycleTest, SafetyValveStopsDrainingNewNodesAtHalfTheFleet) {
  HealthEngine e(Fleet(10), InPool(), 0);
  // A bad driver push: double-bit ECC "errors" on six nodes within a minute, and an Xid 79.
  for (uint32_t n = 0; n < 6; ++n) ASSERT_TRUE(e.ObserveGpuEvent(n, Xid(0, 48, 1000)).ok());
  ASSERT_TRUE(e.ObserveGpuEvent(6, Xid(1, 79, 1000)).ok());
  ASSERT_TRUE(e.Apply(Act(Kind::kDrain, 7, -1, 1000, Remedy::kGpuReset, "bios update")).ok());
  Evaluation ev = e.Evaluate(60'000);
  EXPECT_EQ(ev.drain_gpus, (std::vector<uint32_t>{0, 8, 16, 24, 32}));  // nodes 0-4
  EXPECT_EQ(ev.drain_nodes, std::vector<uint32_t>{7});  // the operator's cordon still goes
  EXPECT_TRUE(ev.safety_valve_tripped);
  EXPECT_EQ(e.gpu_state(5 * 8), HealthState::kDegraded);  // held back: no new gangs, keeps work
  EXPECT_EQ(e.node_state(6), HealthState::kDegraded);
  ASSERT_EQ(ev.held_back.size(), 2u);
  EXPECT_EQ(ev.held_back[0].type, "safety_valve");
  EXPECT_EQ(ev.held_back[0].reason,
            "safety valve: 5 of 10 nodes cordoned within 5m (limit 50%), tripped at "
            "1970-01-01T00:01:00Z; not draining node-5 (5 still within the window); check the "
            "rule, then reset the valve");
  EXPECT_EQ(e.node_condition(5), (NodeCondition{true, false, 2, 0}));
  // Still held long after the window, until an operator resets the valve.
  EXPECT_EQ(e.Evaluate(kHour).held_back.size(), 2u);
  ASSERT_TRUE(e.Apply(Act(Kind::kResetSafetyValve, 0, -1, kHour)).ok());
  Evaluation after = e.Evaluate(kHour + 1);
  EXPECT_EQ(after.drain_gpus, std::vector<uint32_t>{40});
  EXPECT_EQ(after.drain_nodes, std::vector<uint32_t>{6});
  EXPECT_TRUE(after.held_back.empty());
  EXPECT_TRUE(e.Report(5).conditions.empty());  // the safety_valve condition closed
}

TEST(HealthLifecycleTest, RecoveryNeedsFaultsClearedAndAPassingValidation) {
  HealthEngine e(Fleet(1), HealthOptions{}, 0);
  ASSERT_TRUE(e.ObserveValidation(0, Passing(100)).ok());
  e.Evaluate(100);
  ASSERT_EQ(e.node_state(0), HealthState::kHealthy);

  GpuSample s = Sample(3, 1000);
  s.ecc_dbe_volatile = 2;
  s.nvlink_down = 1;
  ASSERT_TRUE(e.ObserveGpu(0, s).ok());
  e.Evaluate(1000);
  EXPECT_EQ(e.gpu_state(3), HealthState::kDraining);
  ASSERT_TRUE(e.Apply(Act(Kind::kWorkDrained, 0, 3, 2000)).ok());
  e.Evaluate(2000);
  EXPECT_EQ(e.gpu_state(3), HealthState::kQuarantined);
  // Validation alone does not bring it back while faults are open.
  ASSERT_TRUE(e.ObserveValidation(0, Passing(3000)).ok());
  e.Evaluate(3000);
  EXPECT_EQ(e.gpu_state(3), HealthState::kQuarantined);
  // The reset clears the latched ECC fault, but the NVLink link is still down.
  ASSERT_TRUE(e.Apply(Act(Kind::kRemediated, 0, 3, 4000, Remedy::kGpuReset, "nvidia-smi -r")).ok());
  s.at = 4500;
  s.ecc_dbe_volatile = 0;
  ASSERT_TRUE(e.ObserveGpu(0, s).ok());
  e.Evaluate(4500);
  EXPECT_EQ(e.gpu_state(3), HealthState::kQuarantined);
  // The link comes up: pending validation, which the engine asks for.
  s.at = 5000;
  s.nvlink_down = 0;
  ASSERT_TRUE(e.ObserveGpu(0, s).ok());
  Evaluation pending = e.Evaluate(5000);
  EXPECT_EQ(e.gpu_state(3), HealthState::kPendingValidation);
  EXPECT_FALSE(e.gpu_available(3));
  EXPECT_EQ(pending.validate_nodes, std::vector<uint32_t>{0});
  EXPECT_TRUE(e.Report(0).needs_validation);
  // Only a validation that finished after that counts.
  ASSERT_TRUE(e.ObserveValidation(0, Passing(6000)).ok());
  Evaluation back = e.Evaluate(6000);
  EXPECT_EQ(e.gpu_state(3), HealthState::kHealthy);
  EXPECT_TRUE(e.gpu_available(3));
  ASSERT_EQ(back.transitions.size(), 1u);
  EXPECT_EQ(back.transitions[0].ToString("node-0"),
            "node-0 GPU 3: pending_validation -> healthy: validation passed");
}

TEST(HealthLifecycleTest, FiveFatalXidsInADayTakeTheGpuOutOfThePool) {
  HealthEngine e(Fleet(1), HealthOptions{}, 0);
  ASSERT_TRUE(e.ObserveValidation(0, Passing(0)).ok());
  for (int i = 0; i < 5; ++i) {
    Time t = kMinute + i * 2 * kHour;
    ASSERT_TRUE(e.ObserveGpuEvent(0, Xid(6, i % 2 ? 48 : 119, t)).ok());
    e.Evaluate(t);
    if (i == 4) break;
    ASSERT_TRUE(e.Apply(Act(Kind::kRemediated, 0, 6, t + kHour)).ok());
    e.Evaluate(t + kHour);
    ASSERT_TRUE(e.ObserveValidation(0, Passing(t + kHour + 1)).ok());
    e.Evaluate(t + kHour + 1);
    ASSERT_EQ(e.gpu_state(6), HealthState::kHealthy) << i;
  }
  EXPECT_EQ(e.gpu_state(6), HealthState::kFailed);
  EXPECT_FALSE(e.gpu_available(6));
  NodeReport rep = e.Report(0);
  EXPECT_EQ(rep.state, HealthState::kHealthy);  // the node and its other GPUs carry on
  EXPECT_TRUE(rep.condition.schedulable);
  // Only a repair brings it back, through validation.
  ASSERT_TRUE(e.Apply(Act(Kind::kRemediated, 0, 6, 20 * kHour, Remedy::kRepair, "RMA")).ok());
  e.Evaluate(20 * kHour);
  EXPECT_EQ(e.gpu_state(6), HealthState::kPendingValidation);
}

TEST(HealthLifecycleTest, Xid79AfterTwoRebootsFailsTheNode) {
  HealthEngine e(Fleet(1), InPool(), 0);
  Time t = 0;
  for (int reboot = 0; reboot < 2; ++reboot) {
    ASSERT_TRUE(e.ObserveGpuEvent(0, Xid(2, 79, t)).ok());
    e.Evaluate(t);
    ASSERT_EQ(e.node_state(0), HealthState::kDraining);
    t += kHour;
    ASSERT_TRUE(e.Apply(Act(Kind::kRemediated, 0, -1, t, Remedy::kNodeReboot)).ok());
    Evaluation ev = e.Evaluate(t);
    ASSERT_EQ(e.node_state(0), HealthState::kHealthy) << ev.transitions.back().reason;
    t += kHour;
  }
  ASSERT_TRUE(e.ObserveGpuEvent(0, Xid(2, 79, t)).ok());
  Evaluation ev = e.Evaluate(t);
  EXPECT_EQ(e.node_state(0), HealthState::kFailed);
  EXPECT_FALSE(e.node_condition(0).schedulable);
  EXPECT_EQ(ev.transitions.back().reason,
            "Xid 79 again after 2 reboots: the hardware needs inspection");
}

// The node fails straight from the pool, with work on it: that work is drained, or the gang on it
// runs on a failed node and never restarts.
TEST(HealthLifecycleTest, ANodeThatFailsStraightFromThePoolHasItsWorkDrained) {
  HealthEngine e(Fleet(1), InPool(), 0);
  Time t = 0;
  for (int reboot = 0; reboot < 2; ++reboot) {
    ASSERT_TRUE(e.ObserveGpuEvent(0, Xid(2, 79, t)).ok());
    EXPECT_EQ(e.Evaluate(t).drain_nodes, std::vector<uint32_t>{0});
    t += kHour;
    ASSERT_TRUE(e.Apply(Act(Kind::kRemediated, 0, -1, t, Remedy::kNodeReboot)).ok());
    e.Evaluate(t);
    t += kHour;
  }
  ASSERT_TRUE(e.ObserveGpuEvent(0, Xid(2, 79, t)).ok());
  Evaluation ev = e.Evaluate(t);
  ASSERT_EQ(e.node_state(0), HealthState::kFailed);
  EXPECT_EQ(ev.drain_nodes, std::vector<uint32_t>{0});
  // Once failed, nothing is drained again.
  EXPECT_TRUE(e.Evaluate(t + kMinute).drain_nodes.empty());
}

TEST(HealthLifecycleTest, LostNodeIsDrainedWithoutTheValveAndValidatedWhenItReturns) {
  HealthEngine e(Fleet(2), HealthOptions{}, 0);
  for (uint32_t n = 0; n < 2; ++n) ASSERT_TRUE(e.ObserveValidation(n, Passing(10)).ok());
  e.Evaluate(10);
  ASSERT_TRUE(
      e.Apply(Act(Kind::kNodeLost, 0, -1, 1000, Remedy::kGpuReset, "no heartbeat 3s")).ok());
  ASSERT_TRUE(e.Apply(Act(Kind::kNodeLost, 1, -1, 1000)).ok());
  Evaluation ev = e.Evaluate(1000);
  EXPECT_EQ(e.node_state(0), HealthState::kQuarantined);  // its gangs were requeued already
  EXPECT_EQ(e.node_state(1), HealthState::kQuarantined);  // facts are never held back
  EXPECT_EQ(ev.drain_nodes, (std::vector<uint32_t>{0, 1}));
  EXPECT_FALSE(e.safety_valve().tripped());
  ASSERT_TRUE(e.Apply(Act(Kind::kNodeReturned, 0, -1, 2000)).ok());
  Evaluation back = e.Evaluate(2000);
  EXPECT_EQ(e.node_state(0), HealthState::kPendingValidation);
  EXPECT_EQ(back.validate_nodes, std::vector<uint32_t>{0});
  ASSERT_TRUE(e.ObserveValidation(0, Passing(3000)).ok());
  e.Evaluate(3000);
  EXPECT_EQ(e.node_state(0), HealthState::kHealthy);
}

TEST(HealthLifecycleTest, ConfigDriftDegradesTheNode) {
  HealthEngine e(Fleet(1), InPool(), 0);
  e.SetBaselines({{"hgx", "550.54.15", "12.4", "", ""}});
  ASSERT_TRUE(e.ObserveConfig(0, {"535.104.05", "12.4", "6.1.0", "24.01"}, 1000).ok());
  Evaluation ev = e.Evaluate(1000);
  EXPECT_EQ(e.node_state(0), HealthState::kDegraded);
  EXPECT_FALSE(e.node_condition(0).gangs_allowed);
  EXPECT_EQ(ev.transitions[0].reason,
            "config_drift: software differs from the baseline: driver 535.104.05, expected "
            "550.54.15");
  ASSERT_TRUE(e.ObserveConfig(0, {"550.54.15", "12.4", "6.1.0", "24.01"}, 2000).ok());
  e.Evaluate(2000);
  EXPECT_EQ(e.node_state(0), HealthState::kHealthy);
}

TEST(HealthLifecycleTest, RestoredQuarantineStillNeedsRemediationAndValidation) {
  HealthEngine e(Fleet(1), HealthOptions{}, 0);
  ASSERT_TRUE(e.Restore(0, -1, HealthState::kQuarantined, 0, "xid_79 on GPU 2").ok());
  ASSERT_TRUE(e.ObserveValidation(0, Passing(100)).ok());
  e.Evaluate(100);
  EXPECT_EQ(e.node_state(0), HealthState::kQuarantined);
  ASSERT_TRUE(e.Apply(Act(Kind::kRemediated, 0, -1, 200, Remedy::kNodeReboot)).ok());
  e.Evaluate(200);
  EXPECT_EQ(e.node_state(0), HealthState::kPendingValidation);
}

TEST(HealthLifecycleTest, NewNodesAskForValidationAndFailingGpusAreQuarantinedAtOnce) {
  HealthOptions o;
  o.validation.references.push_back({"H100", 990, 0, 0, 0});
  HealthEngine e(Fleet(2), o, 0);
  Evaluation first = e.Evaluate(0);
  EXPECT_EQ(first.validate_nodes, (std::vector<uint32_t>{0, 1}));
  EXPECT_TRUE(e.Evaluate(1).validate_nodes.empty());  // asked once
  ValidationReport r = Passing(100);
  r.gpus[2].gemm_tflops = 500;  // below 0.75 x 990
  ASSERT_TRUE(e.ObserveValidation(0, r).ok());
  Evaluation ev = e.Evaluate(100);
  EXPECT_EQ(e.node_state(0), HealthState::kHealthy);  // the node passed; one GPU did not
  EXPECT_EQ(e.gpu_state(2), HealthState::kQuarantined);
  EXPECT_TRUE(ev.drain_gpus.empty());  // nothing ran on it
  EXPECT_EQ(e.node_condition(0), NodeCondition{});
  EXPECT_FALSE(e.gpu_available(2));
}

TEST(HealthLifecycleTest, UnchangedNodesAreNotReportedAgain) {
  HealthEngine e(Fleet(3), InPool(), 0);
  EXPECT_TRUE(e.Evaluate(0).changed.empty());
  ASSERT_TRUE(e.ObserveGpu(1, Sample(0, 10)).ok());
  EXPECT_TRUE(e.Evaluate(10).changed.empty());  // a healthy sample changes nothing
  ASSERT_TRUE(e.ObserveGpuEvent(2, Xid(0, 48, 20)).ok());
  Evaluation ev = e.Evaluate(20);
  ASSERT_EQ(ev.changed.size(), 1u);
  EXPECT_EQ(ev.changed[0].name, "node-2");
  EXPECT_FALSE(ev.changed[0].gpus[0].available);
  EXPECT_EQ(ev.changed[0].gpus[0].gpu, 16u);
  EXPECT_TRUE(e.Evaluate(30).changed.empty());
}

TEST(HealthLifecycleTest, BadInputsAreRejectedWithASentence) {
  HealthEngine e(Fleet(1, 4), InPool(), 0);
  Status s = e.ObserveGpu(0, Sample(4, 0));
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "node-0 has 4 GPUs; there is no GPU 4");
  EXPECT_EQ(e.ObserveGpu(1, Sample(0, 0)).message(), "node 1 is not in the cluster (1 nodes)");
  EXPECT_EQ(e.Apply(Act(Kind::kRemediated, 0, -1, 0, Remedy::kGpuReset)).message(),
            "a GPU reset must name the GPU it reset");
  EXPECT_EQ(e.Apply(Act(Kind::kRemediated, 0, 1, 0, Remedy::kNodeReboot)).message(),
            "a node reboot is for the node; do not name a GPU");
}

}  // namespace
}  // namespace hangar::health
