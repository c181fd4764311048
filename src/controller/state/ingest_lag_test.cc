#include "controller/state/ingest_lag.h"

#include <gtest/gtest.h>

#include <vector>

namespace hangar::controller {
namespace {

TEST(IngestLagTest, ClockOffsetsCancelAndPromptHeartbeatsReadNearZero) {
  IngestLag lag;
  // 100 nodes whose clocks are off by up to +-50 s, each beating once a second, promptly.
  std::vector<IngestLag::NodeClock> nodes(100);
  for (int s = 0; s < 5; ++s) {
    for (int n = 0; n < 100; ++n) {
      const Time ours = 1'000'000 + s * kSecond + n;
      const Time theirs = ours + (n - 50) * kSecond - 3;  // 3 ms on the wire
      lag.Observe(&nodes[n], theirs, ours);
    }
  }
  const auto r = lag.Read(1'000'000 + 4 * kSecond + 100);
  EXPECT_EQ(r.samples, 200);  // the last 1-1.25 s: two rounds
  EXPECT_LE(r.lag, 10);       // the lowest bucket's edge
}

TEST(IngestLagTest, AControllerThatFallsBehindShowsItsLag) {
  IngestLag lag;
  std::vector<IngestLag::NodeClock> nodes(50);
  Time t = 0;
  for (int s = 0; s < 3; ++s, t += kSecond) {
    for (auto& n : nodes) lag.Observe(&n, t, t + 2);
  }
  // Now every heartbeat is taken in 1.5 s after it was sent.
  for (int s = 0; s < 2; ++s, t += kSecond) {
    for (auto& n : nodes) lag.Observe(&n, t, t + 1500);
  }
  const auto r = lag.Read(t + 500);
  EXPECT_GE(r.lag, 1500);
  EXPECT_LE(r.lag, 3000);
  // A second later with nothing received, the reading is empty again.
  EXPECT_EQ(lag.Read(t + 3 * kSecond).samples, 0);
  EXPECT_EQ(lag.Read(t + 3 * kSecond).lag, 0);
}

TEST(IngestLagTest, AFewBadClocksDoNotStretchIt) {
  IngestLag lag;
  std::vector<IngestLag::NodeClock> nodes(100);
  for (int s = 0; s < 3; ++s) {
    for (int n = 0; n < 100; ++n) {
      const Time ours = s * kSecond + n;
      // 5 nodes' clocks jump back 20 s after the first second.
      const Time theirs = ours - 1 - (n < 5 && s > 0 ? 20 * kSecond : 0);
      lag.Observe(&nodes[n], theirs, ours);
    }
  }
  EXPECT_LE(lag.Read(2 * kSecond + 100).lag, 10);
}

}  // namespace
}  // namespace hangar::controller
