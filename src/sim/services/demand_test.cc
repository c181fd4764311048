#include "sim/services/demand.h"

#include <gtest/gtest.h>

namespace hangar::sim {
namespace {

TEST(DemandCurveTest, SinePeaksAtItsHourAndBottomsTwelveHoursAway) {
  const DemandCurve c = DemandCurve::Sine(100, 500, 14 * kHour);
  const Time day = 17 * kDay;  // any midnight
  EXPECT_DOUBLE_EQ(c.RpsAt(day + 14 * kHour), 500);
  EXPECT_NEAR(c.RpsAt(day + 2 * kHour), 100, 1e-9);
  EXPECT_NEAR(c.RpsAt(day + 8 * kHour), 300, 1e-9);  // a quarter of the day from the peak
  EXPECT_NEAR(c.RpsAt(day + 20 * kHour), 300, 1e-9);
  EXPECT_DOUBLE_EQ(c.RpsAt(day + 14 * kHour + kDay), 500);  // every day alike
  EXPECT_DOUBLE_EQ(c.Peak(), 500);
}

TEST(DemandCurveTest, HourlyRatesHoldForTheirHour) {
  std::vector<double> rates(24, 10);
  rates[13] = 70;
  const DemandCurve c = DemandCurve::Hourly(rates);
  EXPECT_DOUBLE_EQ(c.RpsAt(13 * kHour), 70);
  EXPECT_DOUBLE_EQ(c.RpsAt(14 * kHour - 1), 70);
  EXPECT_DOUBLE_EQ(c.RpsAt(14 * kHour), 10);
  EXPECT_DOUBLE_EQ(c.RpsAt(3 * kDay + 13 * kHour + 30 * kMinute), 70);
  EXPECT_DOUBLE_EQ(c.Peak(), 70);
}

}  // namespace
}  // namespace hangar::sim
