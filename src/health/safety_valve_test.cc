#include "health/safety_valve.h"

#include <gtest/gtest.h>

namespace hangar::health {
namespace {

TEST(SafetyValveTest, TripsAtHalfTheFleetWithinFiveMinutesAndStaysTripped) {
  SafetyValve v({}, 10);
  for (uint32_t n = 0; n < 4; ++n) EXPECT_TRUE(v.Admit(n, n * kSecond));
  EXPECT_FALSE(v.tripped());
  EXPECT_TRUE(v.Admit(4, 4 * kSecond));  // the fifth of ten: allowed, and now it trips
  EXPECT_TRUE(v.tripped());
  EXPECT_EQ(v.RecentCordons(4 * kSecond), 5);
  EXPECT_FALSE(v.Admit(5, 5 * kSecond));
  EXPECT_TRUE(v.Admit(2, 5 * kSecond));  // already cordoned within the window: more GPUs may go
  EXPECT_EQ(v.HeldReason("node-5", 4 * kSecond + kMinute),
            "safety valve: 5 of 10 nodes cordoned within 5m (limit 50%), tripped at "
            "1970-01-01T00:00:04Z; not draining node-5 (5 still within the window); check the "
            "rule, then reset the valve");
  // Long after the window: still tripped until someone looks.
  EXPECT_FALSE(v.Admit(5, kHour));
  v.Reset();
  EXPECT_FALSE(v.tripped());
  EXPECT_TRUE(v.Admit(5, kHour));
}

TEST(SafetyValveTest, SmallClustersStillDrainRealFaults) {
  SafetyValve v({}, 2);
  EXPECT_TRUE(v.Admit(0, 0));
  EXPECT_TRUE(v.Admit(1, kSecond));  // two of two, but fewer than min_cordons
  EXPECT_FALSE(v.tripped());
  SafetyValve four({}, 4);
  for (uint32_t n = 0; n < 3; ++n) EXPECT_TRUE(four.Admit(n, 0));
  EXPECT_TRUE(four.tripped());
  EXPECT_FALSE(four.Admit(3, 0));
}

TEST(SafetyValveTest, CordonsSpreadOverTimeDoNotTrip) {
  SafetyValve v({}, 10);
  for (uint32_t n = 0; n < 9; ++n) EXPECT_TRUE(v.Admit(n, n * 2 * kMinute));
  EXPECT_FALSE(v.tripped());  // never more than 3 within any 5 minutes
}

}  // namespace
}  // namespace hangar::health
