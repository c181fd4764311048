#include "sched/placement/packing_prices.h"

#include <gtest/gtest.h>

#include <utility>
#include <vector>

namespace hangar::sched::placement {
namespace {

using Demand = std::vector<std::pair<int32_t, double>>;

TEST(MaximizeUnderUnitRows, SolvesASmallLp) {
  // max 3x + 2y st x + y <= 1, 2x <= 1 (x <= 0.5): x = 0.5, y = 0.5, objective 2.5.
  const std::vector<double> y = MaximizeUnderUnitRows({3, 2}, {{1, 1}, {2, 0}});
  ASSERT_EQ(y.size(), 2u);
  EXPECT_NEAR(y[0], 0.5, 1e-9);
  EXPECT_NEAR(y[1], 0.5, 1e-9);
}

TEST(PackingPrices, HalvesFillAGpuTwoByTwo) {
  const Demand d = {{500, 1.0}};
  const PackingPrices p = PackingPrices::Compute(d);
  ASSERT_FALSE(p.empty());
  EXPECT_NEAR(p.Worth(500), 500, 1e-6);
  EXPECT_NEAR(p.Packed(1000), 1000, 1e-6);
  EXPECT_NEAR(p.Regret(1000, 500), 0, 1e-6);  // a fresh GPU: the pair starts there
  EXPECT_NEAR(p.Regret(500, 500), 0, 1e-6);   // beside another 500: completes the pair
  EXPECT_NEAR(p.gpus_per_weight(), 0.5, 1e-9);
}

TEST(PackingPrices, LeftoversThatOnlyRareTasksFitAreWorthNothing) {
  // Many 810s, a few 160s: each 810 needs its own GPU whatever happens, and the 160s ride along
  // in the leftovers, so they cost nothing.
  const Demand d = {{810, 0.5}, {160, 0.05}};
  const PackingPrices p = PackingPrices::Compute(d);
  EXPECT_NEAR(p.Worth(810), 1000, 1e-6);
  EXPECT_NEAR(p.Worth(160), 0, 1e-6);
  EXPECT_NEAR(p.Regret(1000, 810), 0, 1e-6);
  EXPECT_NEAR(p.gpus_per_weight(), 0.5, 1e-9);
}

TEST(PackingPrices, ChargesThePairingThatStrandsALeftover) {
  // openb's common sizes: 470s pair up, 650s take a 320, 320s go three to a GPU.
  const Demand d = {{470, 0.09}, {320, 0.04}, {650, 0.03}, {230, 0.017}};
  const PackingPrices p = PackingPrices::Compute(d);
  // Two 470s are a tight pattern: the second 470 regrets nothing.
  EXPECT_NEAR(p.Regret(530, 470), 0, 1e-6);
  // A 320 beside a 470 leaves 210, which none of these sizes fits: it gives something up...
  EXPECT_GT(p.Regret(530, 320), 1.0);
  // ...while a 320 beside a 650 is the best use of the 350 left.
  EXPECT_NEAR(p.Regret(350, 320), 0, 1e-6);
  // No placement gains worth out of nothing, and none is charged more than the GPU's worth.
  for (int32_t f = 0; f <= 1000; f += 10) {
    for (int32_t s : {470, 320, 650, 230}) {
      const double r = p.Regret(f, s);
      EXPECT_GE(r, 0);
      EXPECT_LE(r, 1000 + 1e-6);
    }
  }
  // The prices are a feasible dual: nothing fitting in one GPU is worth more than one GPU.
  EXPECT_LE(p.Packed(1000), 1000 + 1e-6);
  EXPECT_GT(p.patterns(), 4u);
}

TEST(PackingPrices, IgnoresWholeGpusAndEmptyDemand) {
  EXPECT_TRUE(PackingPrices::Compute(Demand{}).empty());
  EXPECT_TRUE(PackingPrices::Compute(Demand{{1000, 1.0}, {0, 1.0}, {300, 0.0}}).empty());
  const PackingPrices none;
  EXPECT_EQ(none.Regret(1000, 470), 0);
}

TEST(PackingPrices, RepeatedSizesAddUp) {
  const Demand split = {{470, 0.05}, {470, 0.04}, {320, 0.04}};
  const Demand merged = {{470, 0.09}, {320, 0.04}};
  const PackingPrices a = PackingPrices::Compute(split), b = PackingPrices::Compute(merged);
  for (int32_t f = 0; f <= 1000; f += 10) EXPECT_NEAR(a.Packed(f), b.Packed(f), 1e-6);
  EXPECT_NEAR(a.gpus_per_weight(), b.gpus_per_weight(), 1e-9);
}

}  // namespace
}  // namespace hangar::sched::placement
