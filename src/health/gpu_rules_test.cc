#include "health/gpu_rules.h"

#include <gtest/gtest.h>

namespace hangar::health {
namespace {

GpuSample Healthy(Time at) {
  GpuSample s;
  s.index = 1;
  s.at = at;
  s.util_pct = 90;
  s.temperature_c = 70;
  s.pcie_gen = s.pcie_gen_max = 5;
  s.pcie_width = s.pcie_width_max = 16;
  return s;
}

const Finding* Raised(const RuleOutput& out, const std::string& key) {
  for (const Finding& f : out.raised) {
    if (f.key == key) return &f;
  }
  return nullptr;
}

bool Cleared(const RuleOutput& out, const std::string& key) {
  for (const auto& [scope, k] : out.cleared) {
    if (k == key) return true;
  }
  return false;
}

TEST(PcieReplayLimitTest, DcgmCeilings) {
  EXPECT_EQ(PcieReplayLimitPerMinute(4, 16), 16u);
  EXPECT_EQ(PcieReplayLimitPerMinute(5, 16), 31u);
  EXPECT_EQ(PcieReplayLimitPerMinute(3, 4), 2u);
  EXPECT_EQ(PcieReplayLimitPerMinute(0, 16), 0u);  // unknown link: no rule
}

TEST(GpuRulesTest, HealthySampleRaisesNothing) {
  Thresholds th;
  GpuRules rules(1, th);
  RuleOutput out;
  rules.OnSample(Healthy(0), th, &out);
  EXPECT_TRUE(out.raised.empty());
  EXPECT_TRUE(Cleared(out, "pcie_link_degraded"));
}

TEST(GpuRulesTest, PcieLinkBelowMaxIsSuspectWithTheLinkInTheReason) {
  Thresholds th;
  GpuRules rules(1, th);
  GpuSample s = Healthy(0);
  s.pcie_gen = 3;
  s.pcie_width = 4;
  RuleOutput out;
  rules.OnSample(s, th, &out);
  const Finding* f = Raised(out, "pcie_link_degraded");
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->condition.effect, Effect::kSuspect);
  EXPECT_EQ(f->condition.reason,
            "PCIe Gen5 x16 → Gen3 x4 on GPU 1: the link trained below its maximum");
}

TEST(GpuRulesTest, IdleGpuBelowItsGenerationIsNoVerdict) {
  Thresholds th;
  GpuRules rules(1, th);
  GpuSample s = Healthy(0);
  s.util_pct = 0;
  s.pcie_gen = 1;  // power saving
  RuleOutput out;
  rules.OnSample(s, th, &out);
  EXPECT_EQ(Raised(out, "pcie_link_degraded"), nullptr);
  EXPECT_FALSE(Cleared(out, "pcie_link_degraded"));
}

TEST(GpuRulesTest, PcieReplaysAboveTheCeilingWarn) {
  Thresholds th;
  GpuRules rules(1, th);
  GpuSample s = Healthy(0);
  s.pcie_replay_count = 1000;
  RuleOutput out;
  rules.OnSample(s, th, &out);
  s.at = 30 * kSecond;
  s.pcie_replay_count = 1031;  // 31 in the minute: at the Gen5 x16 ceiling, not above
  rules.OnSample(s, th, &out);
  EXPECT_EQ(Raised(out, "pcie_replays"), nullptr);
  s.at = 40 * kSecond;
  s.pcie_replay_count = 1032;
  rules.OnSample(s, th, &out);
  const Finding* f = Raised(out, "pcie_replays");
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->condition.reason,
            "GPU 1: 32 PCIe replays in the last minute (limit 31/min for Gen5 x16)");
  EXPECT_EQ(f->clearing, Clearing::kAfterQuiet);
}

TEST(GpuRulesTest, MemoryErrorsFollowDcgm) {
  Thresholds th;
  GpuRules rules(1, th);
  GpuSample s = Healthy(0);
  s.ecc_dbe_volatile = 1;
  s.retired_pages = 63;
  s.remapped_rows_uncorrectable = 512;
  s.remap_failure = true;
  RuleOutput out;
  rules.OnSample(s, th, &out);
  ASSERT_NE(Raised(out, "ecc_dbe"), nullptr);
  EXPECT_EQ(Raised(out, "ecc_dbe")->condition.effect, Effect::kDrain);
  EXPECT_EQ(Raised(out, "ecc_dbe")->clearing, Clearing::kOnRemediation);
  EXPECT_EQ(Raised(out, "retired_pages")->condition.effect, Effect::kDrain);
  EXPECT_EQ(Raised(out, "remapped_rows")->condition.effect, Effect::kSuspect);
  EXPECT_EQ(Raised(out, "row_remap_failure")->condition.action,
            RecommendedAction::kDrainGpuForRepair);
  RuleOutput below;
  s.at = kSecond;
  s.retired_pages = 62;
  s.remapped_rows_uncorrectable = 511;
  rules.OnSample(s, th, &below);
  EXPECT_EQ(Raised(below, "retired_pages"), nullptr);
  EXPECT_EQ(Raised(below, "remapped_rows"), nullptr);
}

TEST(GpuRulesTest, ThermalViolationAndHardwareSlowdown) {
  Thresholds th;
  GpuRules rules(1, th);
  GpuSample s = Healthy(0);
  RuleOutput out;
  rules.OnSample(s, th, &out);
  s.at = 10 * kSecond;
  s.thermal_violation_ms = 1200;
  rules.OnSample(s, th, &out);
  ASSERT_NE(Raised(out, "thermal_violation"), nullptr);
  EXPECT_EQ(Raised(out, "thermal_violation")->condition.effect, Effect::kSuspect);
  // 0.6 events/min over 10 min = 6 events: 5 is fine, 6 degrades.
  RuleOutput slow;
  for (int m = 1; m <= 5; ++m) {
    s.at = m * kMinute;
    s.hw_slowdown_events = static_cast<uint64_t>(m);
    rules.OnSample(s, th, &slow);
  }
  EXPECT_EQ(Raised(slow, "hw_slowdown"), nullptr);
  s.at = 6 * kMinute;
  s.hw_slowdown_events = 6;
  rules.OnSample(s, th, &slow);
  ASSERT_NE(Raised(slow, "hw_slowdown"), nullptr);
  EXPECT_EQ(Raised(slow, "hw_slowdown")->condition.effect, Effect::kDegrade);
}

TEST(GpuRulesTest, LostGpuAndNvlinkDown) {
  Thresholds th;
  GpuRules rules(1, th);
  GpuSample s = Healthy(0);
  s.nvlink_down = 2;
  RuleOutput out;
  rules.OnSample(s, th, &out);
  ASSERT_NE(Raised(out, "nvlink_down"), nullptr);
  EXPECT_EQ(Raised(out, "nvlink_down")->condition.scope, Scope::kGpu);
  EXPECT_EQ(Raised(out, "nvlink_down")->condition.effect, Effect::kDrain);
  RuleOutput lost;
  s.at = kSecond;
  s.lost = true;
  rules.OnSample(s, th, &lost);
  ASSERT_EQ(lost.raised.size(), 1u);  // nothing else is judged on a lost GPU
  EXPECT_EQ(lost.raised[0].key, "gpu1_lost");
  EXPECT_EQ(lost.raised[0].condition.scope, Scope::kNode);
  EXPECT_TRUE(lost.cleared.empty());
}

}  // namespace
}  // namespace hangar::health
