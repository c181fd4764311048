#include "health/node_rules.h"

#include <gtest/gtest.h>

namespace hangar::health {
namespace {

IbPortSample Port(Time at, std::map<std::string, uint64_t> counters,
                  std::string state = "4: ACTIVE") {
  IbPortSample s;
  s.device = "mlx5_0";
  s.port = 1;
  s.at = at;
  s.state = std::move(state);
  s.phys_state = "5: LinkUp";
  s.counters = std::move(counters);
  return s;
}

const Finding* Raised(const RuleOutput& out, const std::string& key) {
  for (const Finding& f : out.raised) {
    if (f.key == key) return &f;
  }
  return nullptr;
}

TEST(PortRulesTest, LinkDownedIncreaseIsFatalForTheNode) {
  Thresholds th;
  PortRules rules("mlx5_0", 1);
  RuleOutput out;
  rules.OnSample(Port(0, {{"link_downed", 3}}), th, &out);  // baseline, however high
  EXPECT_TRUE(out.raised.empty());
  rules.OnSample(Port(kSecond, {{"link_downed", 4}}), th, &out);
  const Finding* f = Raised(out, "ib_mlx5_0_1_link_downed");
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->condition.effect, Effect::kDrain);
  EXPECT_EQ(f->condition.scope, Scope::kNode);
  EXPECT_EQ(f->clearing, Clearing::kOnRemediation);
  EXPECT_EQ(f->condition.reason,
            "InfiniBand mlx5_0 port 1: link_downed rose by 1 to 4 (any increase is fatal)");
}

TEST(PortRulesTest, CounterResetIsNotAnIncreaseOfTheOldValue) {
  Thresholds th;
  PortRules rules("mlx5_0", 1);
  RuleOutput out;
  rules.OnSample(Port(0, {{"link_downed", 7}, {"symbol_error", 5000}}), th, &out);
  // The counters were cleared: lower readings, nothing new since.
  rules.OnSample(Port(kSecond, {{"link_downed", 0}, {"symbol_error", 0}}), th, &out);
  rules.OnSample(Port(2 * kSecond, {{"link_downed", 0}, {"symbol_error", 2}}), th, &out);
  EXPECT_TRUE(out.raised.empty());
  // After the reset, a real increase is still seen.
  rules.OnSample(Port(3 * kSecond, {{"link_downed", 1}, {"symbol_error", 2}}), th, &out);
  ASSERT_NE(Raised(out, "ib_mlx5_0_1_link_downed"), nullptr);
}

TEST(PortRulesTest, SymbolErrorsDegradeByTheSecondAndKillByTheHour) {
  Thresholds th;
  PortRules rules("mlx5_0", 1);
  RuleOutput out;
  rules.OnSample(Port(0, {{"symbol_error", 0}}), th, &out);
  rules.OnSample(Port(kSecond, {{"symbol_error", 11}}), th, &out);  // 11/s > 10/s
  ASSERT_NE(Raised(out, "ib_mlx5_0_1_symbol_error"), nullptr);
  EXPECT_EQ(Raised(out, "ib_mlx5_0_1_symbol_error")->condition.effect, Effect::kDegrade);
  EXPECT_EQ(Raised(out, "ib_mlx5_0_1_symbol_error_hourly"), nullptr);
  // A slow trickle: 5 per minute stays under 10/s but passes 120 within the hour.
  RuleOutput slow;
  uint64_t n = 11;
  for (int m = 1; m <= 25; ++m) {
    n += 5;
    rules.OnSample(Port(m * kMinute, {{"symbol_error", n}}), th, &slow);
  }
  EXPECT_EQ(Raised(slow, "ib_mlx5_0_1_symbol_error"), nullptr);
  const Finding* fatal = Raised(slow, "ib_mlx5_0_1_symbol_error_hourly");
  ASSERT_NE(fatal, nullptr);
  EXPECT_EQ(fatal->condition.effect, Effect::kDrain);
}

TEST(PortRulesTest, RateRulesAndAnyIncreaseRules) {
  Thresholds th;
  PortRules rules("mlx5_0", 1);
  std::map<std::string, uint64_t> zero = {{"link_error_recovery", 0},
                                          {"port_rcv_errors", 0},
                                          {"port_xmit_discards", 0},
                                          {"local_ack_timeout_err", 0},
                                          {"rnr_nak_retry_err", 0},
                                          {"local_link_integrity_errors", 0},
                                          {"excessive_buffer_overrun_errors", 0},
                                          {"port_xmit_data", 0}};
  RuleOutput out;
  rules.OnSample(Port(0, zero), th, &out);
  std::map<std::string, uint64_t> next = {{"link_error_recovery", 6},
                                          {"port_rcv_errors", 11},
                                          {"port_xmit_discards", 100},
                                          {"local_ack_timeout_err", 2},
                                          {"rnr_nak_retry_err", 1},
                                          {"local_link_integrity_errors", 0},
                                          {"excessive_buffer_overrun_errors", 1},
                                          {"port_xmit_data", 1'000'000}};
  rules.OnSample(Port(kSecond, next), th, &out);
  EXPECT_EQ(Raised(out, "ib_mlx5_0_1_link_error_recovery")->condition.effect, Effect::kDegrade);
  EXPECT_EQ(Raised(out, "ib_mlx5_0_1_port_rcv_errors")->condition.effect, Effect::kDegrade);
  EXPECT_EQ(Raised(out, "ib_mlx5_0_1_port_xmit_discards"), nullptr);  // 100/s is the limit
  EXPECT_EQ(Raised(out, "ib_mlx5_0_1_local_ack_timeout_err")->condition.effect, Effect::kDegrade);
  EXPECT_EQ(Raised(out, "ib_mlx5_0_1_rnr_nak_retry_err")->condition.effect, Effect::kDrain);
  EXPECT_EQ(Raised(out, "ib_mlx5_0_1_local_link_integrity_errors"), nullptr);
  EXPECT_EQ(Raised(out, "ib_mlx5_0_1_excessive_buffer_overrun_errors")->condition.effect,
            Effect::kDrain);
  EXPECT_EQ(out.raised.size(), 5u);  // port_xmit_data is not an error counter
}

TEST(PortRulesTest, PortNotActiveIsFatalAndSaturationIsReported) {
  Thresholds th;
  PortRules rules("mlx5_1", 1);
  RuleOutput out;
  IbPortSample s = Port(0, {{"link_downed", 255}}, "1: DOWN");
  s.device = "mlx5_1";
  s.phys_state = "3: Disabled";
  rules.OnSample(s, th, &out);
  const Finding* down = Raised(out, "ib_mlx5_1_1_down");
  ASSERT_NE(down, nullptr);
  EXPECT_EQ(down->condition.effect, Effect::kDrain);
  EXPECT_EQ(down->condition.reason,
            "InfiniBand mlx5_1 port 1 is 1: DOWN (physical state 3: Disabled), not ACTIVE: the "
            "node is off its fabric");
  ASSERT_NE(Raised(out, "ib_mlx5_1_1_link_downed_saturated"), nullptr);
  EXPECT_EQ(Raised(out, "ib_mlx5_1_1_link_downed_saturated")->condition.effect, Effect::kNone);
}

TEST(ConfigDriftTest, ComparesOnlyWhatIsExpectedAndReported) {
  ConfigFacts want{"550.54.15", "12.4", "", "24.01"};
  ConfigFacts have{"535.104.05", "12.4", "6.1.0-18", ""};
  auto drift = ConfigDrift(have, want);
  ASSERT_EQ(drift.size(), 1u);
  EXPECT_EQ(drift[0], "driver 535.104.05, expected 550.54.15");
}

}  // namespace
}  // namespace hangar::health
