#include "health/subject.h"

#include <gtest/gtest.h>

namespace hangar::health {
namespace {

Finding Make(std::string key, Effect effect, Clearing clearing = Clearing::kWhileObserved) {
  Finding f;
  f.key = f.condition.type = std::move(key);
  f.condition.effect = effect;
  f.condition.reason = "because";
  f.clearing = clearing;
  f.quiet = 10 * kMinute;
  return f;
}

HealthState Step(Subject& s, Time now, const SubjectPolicy& p = {}) {
  s.Advance(now, p, "");
  return s.state();
}

TEST(SubjectTest, WarningsMakeSuspectThenDegraded) {
  Subject s(HealthState::kHealthy, 0);
  s.faults().Assert(Make("pcie_link_degraded", Effect::kSuspect), 1);
  auto step = s.Advance(1, {}, "");
  ASSERT_TRUE(step.has_value());
  EXPECT_EQ(step->to, HealthState::kSuspect);
  EXPECT_EQ(step->reason, "pcie_link_degraded: because");
  s.faults().Assert(Make("thermal_violation", Effect::kSuspect, Clearing::kAfterQuiet), 2);
  EXPECT_EQ(Step(s, 2), HealthState::kDegraded);
  s.faults().Resolve("pcie_link_degraded", 3);
  EXPECT_EQ(Step(s, 3), HealthState::kSuspect);
  s.faults().Expire(3 + 10 * kMinute);
  EXPECT_EQ(Step(s, 3 + 10 * kMinute), HealthState::kHealthy);
}

TEST(SubjectTest, AWarningThatKeepsComingBackDegrades) {
  Subject s(HealthState::kHealthy, 0);
  for (int i = 0; i < 3; ++i) {
    s.faults().Assert(Make("pcie_link_degraded", Effect::kSuspect), i * kHour);
    s.faults().Resolve("pcie_link_degraded", i * kHour + kMinute);
  }
  s.faults().Assert(Make("pcie_link_degraded", Effect::kSuspect), 3 * kHour);
  auto step = s.Advance(3 * kHour, {}, "");
  ASSERT_TRUE(step.has_value());
  EXPECT_EQ(step->to, HealthState::kDegraded);
  EXPECT_NE(step->reason.find("opened 3 times within 1d"), std::string::npos) << step->reason;
}

TEST(SubjectTest, FatalDrainsThenQuarantinesThenValidatesBackToHealthy) {
  SubjectPolicy p;
  Subject s(HealthState::kHealthy, 0);
  s.faults().Assert(Make("ecc_dbe", Effect::kDrain, Clearing::kOnRemediation), 10);
  EXPECT_TRUE(s.WantsNewDrain());
  EXPECT_EQ(Step(s, 10), HealthState::kDraining);
  EXPECT_EQ(Step(s, 20), HealthState::kDraining);  // work still running
  s.WorkDrained(30);
  EXPECT_EQ(Step(s, 30), HealthState::kQuarantined);
  EXPECT_EQ(Step(s, 40), HealthState::kQuarantined);  // latched until remediation
  s.Validated(45, true);  // a validation alone does not clear a latched fault
  EXPECT_EQ(Step(s, 45), HealthState::kQuarantined);
  s.Remediated(Remedy::kGpuReset, 50, "reset by ops");
  EXPECT_EQ(Step(s, 50), HealthState::kPendingValidation);
  // An old sample (from before the reset) cannot reopen it.
  s.faults().Assert(Make("ecc_dbe", Effect::kDrain, Clearing::kOnRemediation), 49);
  EXPECT_EQ(Step(s, 55), HealthState::kPendingValidation);
  s.Validated(40, true);  // finished before it was pending: does not count
  EXPECT_EQ(Step(s, 56), HealthState::kPendingValidation);
  s.Validated(60, true);
  auto step = s.Advance(60, p, "");
  ASSERT_TRUE(step.has_value());
  EXPECT_EQ(step->to, HealthState::kHealthy);
  EXPECT_EQ(step->reason, "validation passed");
}

TEST(SubjectTest, HeldBackDrainDegradesInstead) {
  Subject s(HealthState::kHealthy, 0);
  s.faults().Assert(Make("xid_48", Effect::kDrain, Clearing::kOnRemediation), 1);
  auto step = s.Advance(1, {}, "safety valve: ...");
  ASSERT_TRUE(step.has_value());
  EXPECT_EQ(step->to, HealthState::kDegraded);
  EXPECT_EQ(step->reason, "safety valve: ...");
  EXPECT_EQ(Step(s, 2), HealthState::kDraining);  // the valve opened again
}

TEST(SubjectTest, OperatorCordonIsNeverHeldBack) {
  Subject s(HealthState::kHealthy, 0);
  s.Cordon("bios update");
  EXPECT_TRUE(s.DrainBypassesValve());
  auto step = s.Advance(1, {}, "safety valve: ...");
  ASSERT_TRUE(step.has_value());
  EXPECT_EQ(step->to, HealthState::kDraining);
  EXPECT_EQ(step->reason, "drained by operator: bios update");
  s.WorkDrained(2);
  EXPECT_EQ(Step(s, 2), HealthState::kQuarantined);
  s.Uncordon();
  EXPECT_EQ(Step(s, 3), HealthState::kPendingValidation);
}

TEST(SubjectTest, FiveFatalXidsInADayFail) {
  FailurePolicy fp;
  Subject s(HealthState::kHealthy, 0);
  for (int i = 0; i < 4; ++i) s.RecordFatalXid(48, false, i * kHour, fp);
  EXPECT_NE(Step(s, 4 * kHour), HealthState::kFailed);
  s.RecordFatalXid(48, false, 5 * kHour, fp);
  auto step = s.Advance(5 * kHour, {}, "");
  ASSERT_TRUE(step.has_value());
  EXPECT_EQ(step->to, HealthState::kFailed);
  EXPECT_EQ(step->reason, "5 fatal Xids within 1d: out of the pool until repaired");
  s.Remediated(Remedy::kGpuReset, 6 * kHour, "");
  EXPECT_EQ(Step(s, 6 * kHour), HealthState::kFailed);  // a reset is not a repair
  s.Remediated(Remedy::kRepair, 7 * kHour, "GPU replaced");
  auto back = s.Advance(7 * kHour, {}, "");
  ASSERT_TRUE(back.has_value());
  EXPECT_EQ(back->to, HealthState::kPendingValidation);
  EXPECT_EQ(back->reason, "repaired: GPU replaced");
}

TEST(SubjectTest, FiveFatalXidsSpreadOverMoreThanADayDoNotFail) {
  FailurePolicy fp;
  Subject s(HealthState::kHealthy, 0);
  for (int i = 0; i < 5; ++i) s.RecordFatalXid(48, false, i * 7 * kHour, fp);
  EXPECT_NE(Step(s, 28 * kHour), HealthState::kFailed);
}

TEST(SubjectTest, FiveRemediationsInAWeekFail) {
  Subject s(HealthState::kQuarantined, 0);
  for (int i = 1; i <= 4; ++i) s.Remediated(Remedy::kGpuReset, i * kDay, "");
  EXPECT_EQ(Step(s, 4 * kDay), HealthState::kPendingValidation);
  s.Remediated(Remedy::kGpuReset, 5 * kDay, "");
  EXPECT_EQ(Step(s, 5 * kDay), HealthState::kFailed);
}

TEST(SubjectTest, SameRebootLevelXidAfterTwoRebootsFails) {
  FailurePolicy fp;
  Subject s(HealthState::kHealthy, 0);
  s.RecordFatalXid(79, true, 0, fp);
  s.Remediated(Remedy::kNodeReboot, kHour, "");
  s.RecordFatalXid(79, true, 2 * kHour, fp);  // once after one reboot: not yet
  EXPECT_NE(Step(s, 2 * kHour), HealthState::kFailed);
  s.Remediated(Remedy::kNodeReboot, 3 * kHour, "");
  s.RecordFatalXid(79, true, 4 * kHour, fp);
  auto step = s.Advance(4 * kHour, {}, "");
  ASSERT_TRUE(step.has_value());
  EXPECT_EQ(step->to, HealthState::kFailed);
  EXPECT_EQ(step->reason, "Xid 79 again after 2 reboots: the hardware needs inspection");
}

TEST(SubjectTest, WithoutValidationQuarantineReturnsStraightToThePool) {
  SubjectPolicy p;
  p.require_validation = false;
  Subject s(HealthState::kQuarantined, 0);
  s.faults().Assert(Make("pcie_link_degraded", Effect::kSuspect), 1);
  auto step = s.Advance(1, p, "");
  ASSERT_TRUE(step.has_value());
  EXPECT_EQ(step->to, HealthState::kSuspect);
  EXPECT_EQ(step->reason, "faults cleared; still pcie_link_degraded: because");
}

}  // namespace
}  // namespace hangar::health
