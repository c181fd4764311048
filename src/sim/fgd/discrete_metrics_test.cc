#include "sim/fgd/discrete_metrics.h"

#include <gtest/gtest.h>

#include <vector>

namespace hangar::sim::fgd {
namespace {

TEST(DiscreteMetricsTest, PairwiseSumAddsInNumpysOrder) {
  // Sequentially every 1 is lost against 1e16 (half an ulp, ties to even); numpy adds the 1s
  // among themselves first, in eight running partial sums.
  std::vector<double> v(9, 1.0);
  v[0] = 1e16;
  double sequential = 0;
  for (double x : v) sequential += x;
  EXPECT_EQ(sequential, 1e16);
  EXPECT_EQ(PairwiseSum(v), 1e16 + 8);
  // Short arrays are summed in order.
  std::vector<double> w = {1e16, 1, 1};
  EXPECT_EQ(PairwiseSum(w), 1e16);
  // Above 128 elements the array is halved at a multiple of 8.
  std::vector<double> big(300, 0.1);
  const double half = PairwiseSum(std::span<const double>(big).first(144));
  const double rest = PairwiseSum(std::span<const double>(big).subspan(144));
  EXPECT_EQ(PairwiseSum(big), half + rest);
  EXPECT_NEAR(PairwiseSum(big), 30.0, 1e-12);
}

TEST(DiscreteMetricsTest, RoundingFollowsPythonAndNumpy) {
  EXPECT_EQ(PyRound2(2.675), 2.67);  // 2.675 is stored just below 2.675
  EXPECT_EQ(PyRound2(0.125), 0.12);  // exact tie: to even
  EXPECT_EQ(PyRound2(0.375), 0.38);
  EXPECT_EQ(PyRound2(95.1349999), 95.13);
  EXPECT_EQ(NpRound2(0.125), 0.12);  // rint(12.5) = 12
  EXPECT_EQ(NpRound2(0.135), 0.14);
  EXPECT_EQ(NpRound2(95.227), 95.23);
}

TEST(DiscreteMetricsTest, ColumnsAverageTheSamplesAtEachArrivedPercent) {
  DiscreteCurves c(/*capacity_milli=*/10'000);  // 10 GPUs: 1 % is 100 milli-GPU
  c.Add(0, 0, 0);                               // 0 %
  c.Add(100, 100, 50);                          // 1 %
  c.Add(149, 149, 70);                          // 1.49 % -> 1
  c.Add(350, 300, 1000);                        // 3.5 % -> 4 (half to even)
  c.Add(450, 300, 2000);                        // 4.5 % -> 4
  EXPECT_EQ(c.samples(), 5u);
  const Curve alloc = c.Alloc();
  const Curve frag = c.Frag();
  EXPECT_EQ(*alloc[0], 0.0);
  EXPECT_EQ(*alloc[1], NpRound2((1.0 + 1.49) / 2));
  // No sample at 2 %: the neighbours 1..3 % stand in. Nor at 3 %: 2..4 %.
  EXPECT_EQ(*alloc[2], NpRound2((1.0 + 1.49) / 2));
  EXPECT_EQ(*alloc[3], 3.0);
  EXPECT_EQ(*alloc[4], 3.0);
  EXPECT_EQ(*alloc[5], 3.0);
  EXPECT_FALSE(alloc[6].has_value());
  EXPECT_FALSE(alloc[130].has_value());
  // Fragmentation as % of the cluster's GPUs: 1,500 milli-GPU of 10 GPUs is 15 %.
  EXPECT_EQ(*frag[4], 15.0);
  EXPECT_EQ(*frag[1], 0.6);
}

}  // namespace
}  // namespace hangar::sim::fgd
