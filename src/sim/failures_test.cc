#include "sim/failures.h"

#include <gtest/gtest.h>

#include <cmath>

namespace hangar::sim {
namespace {

TEST(FailureRatesTest, Llama3RatesGiveItsInterruptionCount) {
  const FailureRates r = Llama3Rates();
  // 419 unexpected interruptions in 54 days on 16,384 GPUs.
  EXPECT_NEAR(r.InterruptionsPerGpuHour() * 16384 * 54 * 24, 419.0, 1e-6);
  EXPECT_GT(r.of(FailureKind::kSlowGpu).per_gpu_hour, 0);
  EXPECT_EQ(r.of(FailureKind::kSoftware).repair, 0);  // the node stays in service
  EXPECT_GT(r.of(FailureKind::kHost).repair, 0);
  EXPECT_NEAR(ScaledRates(r, 2).InterruptionsPerGpuHour(), 2 * r.InterruptionsPerGpuHour(), 1e-15);
}

TEST(FailureStreamTest, SameSeedSameEventsAndTimesOnlyGrow) {
  const FailureRates r = ScaledRates(Llama3Rates(), 1000);
  const std::vector<int32_t> gpus(64, 8);
  FailureStream a(r, gpus, 1000, 7), b(r, gpus, 1000, 7), c(r, gpus, 1000, 8);
  bool differs = false;
  Time last = 1000;
  for (int i = 0; i < 200; ++i) {
    EXPECT_EQ(a.next().at, b.next().at);
    EXPECT_EQ(a.next().node, b.next().node);
    EXPECT_EQ(a.next().kind, b.next().kind);
    EXPECT_GT(a.next().at, last);
    last = a.next().at;
    differs |= a.next().at != c.next().at;
    a.Pop();
    b.Pop();
    c.Pop();
  }
  EXPECT_TRUE(differs);
}

TEST(FailureStreamTest, CountsFollowTheRatesByKindAndByGpus) {
  // Node 0 has no GPUs, node 2 twice node 1's: over many events, their shares follow.
  const FailureRates r = Llama3Rates();
  FailureStream s(r, {0, 4, 8}, 0, 3);
  const Duration horizon =
      static_cast<Duration>(20000 / (r.EventsPerGpuHour() * 12) * kHour);  // 20,000 expected
  std::array<int, kFailureKinds> kinds{};
  std::array<int, 3> nodes{};
  int n = 0;
  for (; s.next().at <= horizon; s.Pop(), ++n) {
    kinds[static_cast<size_t>(s.next().kind)]++;
    nodes[s.next().node]++;
  }
  EXPECT_NEAR(n, 20000, 3 * std::sqrt(20000.0));
  EXPECT_EQ(nodes[0], 0);
  EXPECT_NEAR(static_cast<double>(nodes[2]) / nodes[1], 2.0, 0.1);
  for (int k = 0; k < kFailureKinds; ++k) {
    const double share = r.kinds[k].per_gpu_hour / r.EventsPerGpuHour();
    EXPECT_NEAR(static_cast<double>(kinds[k]) / n, share, 0.015)
        << FailureKindName(static_cast<FailureKind>(k));
  }
}

TEST(FailureStreamTest, ScriptedEventsReplayInOrderThenStop) {
  FailureStream s({{10, 1, FailureKind::kHost}, {20, 0, FailureKind::kSlowGpu}});
  EXPECT_EQ(s.next().at, 10);
  EXPECT_EQ(s.next().kind, FailureKind::kHost);
  s.Pop();
  EXPECT_EQ(s.next().node, 0u);
  s.Pop();
  EXPECT_EQ(s.next().at, kNever);
  FailureStream none(Llama3Rates(), {}, 0, 1);  // no GPUs: no failures
  EXPECT_EQ(none.next().at, kNever);
}

}  // namespace
}  // namespace hangar::sim
