#include "health/xid.h"

#include <gtest/gtest.h>

namespace hangar::health {
namespace {

TEST(XidRuleTest, CatalogueMatchesTheReference) {
  struct Want {
    uint64_t code;
    Effect effect;
    Scope scope;
    RecommendedAction action;
  };
  using A = RecommendedAction;
  const Want wants[] = {
      {13, Effect::kNone, Scope::kGpu, A::kNone},
      {31, Effect::kNone, Scope::kGpu, A::kNone},
      {43, Effect::kNone, Scope::kGpu, A::kNone},
      {45, Effect::kNone, Scope::kGpu, A::kNone},
      {48, Effect::kDrain, Scope::kGpu, A::kDrainGpuAndReset},
      {63, Effect::kSuspect, Scope::kGpu, A::kResetGpu},
      {64, Effect::kDrain, Scope::kGpu, A::kDrainGpuForRepair},
      {74, Effect::kDrain, Scope::kGpu, A::kDrainGpuAndReset},
      {79, Effect::kDrain, Scope::kNode, A::kDrainNodeAndReboot},
      {92, Effect::kNone, Scope::kGpu, A::kWatch},
      {94, Effect::kNone, Scope::kGpu, A::kRestartApp},
      {95, Effect::kDrain, Scope::kGpu, A::kDrainGpuAndReset},
      {109, Effect::kSuspect, Scope::kGpu, A::kResetGpu},
      {119, Effect::kDrain, Scope::kGpu, A::kDrainGpuAndReset},
      {120, Effect::kDrain, Scope::kGpu, A::kDrainGpuAndReset},
      {140, Effect::kDrain, Scope::kGpu, A::kDrainGpuAndReset},
      {12345, Effect::kSuspect, Scope::kGpu, A::kRunValidation},  // unknown: a warning
  };
  for (const Want& w : wants) {
    XidRule r = XidRuleFor(w.code);
    EXPECT_EQ(r.effect, w.effect) << w.code;
    EXPECT_EQ(r.scope, w.scope) << w.code;
    EXPECT_EQ(r.action, w.action) << w.code;
  }
  EXPECT_TRUE(XidRuleFor(79).reboot_level);
  EXPECT_FALSE(XidRuleFor(12345).known);
}

TEST(XidHistoryTest, Xid13OnceIsInfoTwiceWithinADayIsSuspect) {
  Thresholds th;
  XidHistory h;
  auto first = h.Apply(2, 13, 0, th);
  EXPECT_EQ(first.finding.condition.effect, Effect::kNone);
  EXPECT_EQ(first.finding.key, "xid_13");
  auto second = h.Apply(2, 13, 5 * kHour, th);
  EXPECT_EQ(second.finding.condition.effect, Effect::kSuspect);
  EXPECT_EQ(second.finding.key, "xid_13_repeated");
  EXPECT_EQ(second.finding.condition.action, RecommendedAction::kRunValidation);
  EXPECT_NE(second.finding.condition.reason.find("2 incidents within 1d"), std::string::npos)
      << second.finding.condition.reason;
}

TEST(XidHistoryTest, Xid13TwiceADayApartIsStillInfo) {
  Thresholds th;
  XidHistory h;
  h.Apply(2, 13, 0, th);
  auto later = h.Apply(2, 13, 25 * kHour, th);
  EXPECT_EQ(later.finding.condition.effect, Effect::kNone);
}

TEST(XidHistoryTest, ABurstIsOneIncident) {
  Thresholds th;
  XidHistory h;
  EXPECT_TRUE(h.Apply(0, 13, 0, th).new_incident);
  auto burst = h.Apply(0, 13, 200, th);  // the driver logs a crash on several channels at once
  EXPECT_FALSE(burst.new_incident);
  EXPECT_EQ(burst.finding.condition.effect, Effect::kNone);
  auto fatal = h.Apply(0, 48, 1000, th);
  EXPECT_TRUE(fatal.fatal);
  EXPECT_TRUE(fatal.new_incident);
}

TEST(XidHistoryTest, AnApplicationCrashingAgainSecondsLaterIsASecondIncident) {
  Thresholds th;
  XidHistory h;
  h.Apply(1, 13, 0, th);
  EXPECT_FALSE(h.Apply(1, 13, th.app_xid_incident - 1, th).new_incident);  // still the burst
  auto again = h.Apply(1, 13, 2 * th.app_xid_incident, th);
  EXPECT_TRUE(again.new_incident);
  EXPECT_EQ(again.finding.condition.effect, Effect::kSuspect);
  // Fatal Xids keep the longer window: a driver repeating one fault is not five faults.
  EXPECT_TRUE(h.Apply(1, 48, 0, th).new_incident);
  EXPECT_FALSE(h.Apply(1, 48, 2 * th.app_xid_incident, th).new_incident);
  EXPECT_TRUE(h.Apply(1, 48, th.xid_incident, th).new_incident);
}

TEST(XidHistoryTest, Xid79SpeaksForTheNode) {
  Thresholds th;
  XidHistory h;
  auto o = h.Apply(3, 79, 0, th);
  EXPECT_EQ(o.finding.condition.scope, Scope::kNode);
  EXPECT_EQ(o.finding.condition.gpu, 3);
  EXPECT_EQ(o.finding.key, "gpu3_xid_79");
  EXPECT_TRUE(o.reboot_level);
  EXPECT_EQ(o.finding.condition.reason, "Xid 79 on GPU 3 (GPU fell off the bus)");
  EXPECT_EQ(o.finding.condition.ToString(),
            "fatal xid_79 (GPU 3): Xid 79 on GPU 3 (GPU fell off the bus); action: "
            "drain_node_and_reboot");
}

}  // namespace
}  // namespace hangar::health
