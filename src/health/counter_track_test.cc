#include "health/counter_track.h"

#include <gtest/gtest.h>

namespace hangar::health {
namespace {

TEST(CounterTrackTest, FirstReadingIsOnlyABaseline) {
  CounterTrack t(kMinute);
  ASSERT_TRUE(t.Add(0, 1'000'000));  // years of history when the controller first meets the node
  EXPECT_EQ(t.last_increase(), 0u);
  EXPECT_EQ(t.InWindow(kMinute), 0);
  ASSERT_TRUE(t.Add(kSecond, 1'000'003));
  EXPECT_EQ(t.last_increase(), 3u);
  EXPECT_DOUBLE_EQ(t.InWindow(kMinute), 3);
}

TEST(CounterTrackTest, ResetCountsTheNewReadingAsTheIncrease) {
  CounterTrack t(kMinute);
  ASSERT_TRUE(t.Add(0, 500));
  ASSERT_TRUE(t.Add(kSecond, 510));
  ASSERT_TRUE(t.Add(2 * kSecond, 4));  // reboot: counters restarted from zero, 4 since
  EXPECT_EQ(t.resets(), 1);
  EXPECT_EQ(t.last_increase(), 4u);
  EXPECT_DOUBLE_EQ(t.InWindow(kMinute), 14);
  ASSERT_TRUE(t.Add(3 * kSecond, 4));  // quiet after the reset
  EXPECT_EQ(t.last_increase(), 0u);
  EXPECT_EQ(t.reading(), 4u);
}

TEST(CounterTrackTest, AgentRestartChangesNothingAndLateReadingsAreIgnored) {
  CounterTrack t(kMinute);
  ASSERT_TRUE(t.Add(10 * kSecond, 100));
  ASSERT_TRUE(t.Add(11 * kSecond, 100));
  EXPECT_FALSE(t.Add(9 * kSecond, 50));  // a message from before the restart, delivered late
  EXPECT_EQ(t.resets(), 0);
  ASSERT_TRUE(t.Add(20 * kSecond, 101));  // the agent came back; the hardware counter went on
  EXPECT_EQ(t.last_increase(), 1u);
  EXPECT_EQ(t.resets(), 0);
}

TEST(CounterTrackTest, WindowsScaleDownSparseReadingsButNeverUp) {
  CounterTrack t(kHour);
  ASSERT_TRUE(t.Add(0, 0));
  ASSERT_TRUE(t.Add(10 * kSecond, 50));       // 50 over 10 s
  EXPECT_DOUBLE_EQ(t.InWindow(kSecond), 5);   // scaled to a 1 s window
  EXPECT_DOUBLE_EQ(t.InWindow(kMinute), 50);  // only 10 s of history: raw count
}

TEST(CounterTrackTest, ThinnedHistoryKeepsLongWindowsAndRecentReadingsExact) {
  CounterTrack t(kHour);
  // One reading per second for two hours, one event per second.
  for (int s = 0; s <= 2 * 3600; ++s) ASSERT_TRUE(t.Add(s * kSecond, static_cast<uint64_t>(s)));
  EXPECT_DOUBLE_EQ(t.InWindow(kSecond), 1);
  EXPECT_NEAR(t.InWindow(kMinute), 60, 1);
  EXPECT_NEAR(t.InWindow(kHour), 3600, 61);
  // An hour-long burst shows up in the hourly window, while the per-second rate stays exact.
  ASSERT_TRUE(t.Add(7201 * kSecond, 7200 + 200));
  EXPECT_DOUBLE_EQ(t.InWindow(kSecond), 200);
}

TEST(CounterTrackTest, QuietRunsKeepTwoPointsAndExactWindows) {
  CounterTrack t(3 * kHour);
  // Quiet for half an hour, 5 events at 1800 s, quiet again until two hours.
  for (int s = 0; s <= 2 * 3600; ++s) ASSERT_TRUE(t.Add(s * kSecond, s < 1800 ? 10 : 15));
  EXPECT_LE(t.points(), 4u);  // not one per reading
  EXPECT_DOUBLE_EQ(t.InWindow(kMinute), 0);
  EXPECT_DOUBLE_EQ(t.InWindow(5399 * kSecond), 0);  // starts after the events
  EXPECT_DOUBLE_EQ(t.InWindow(5401 * kSecond), 5);  // starts before them: exact, not scaled
  EXPECT_DOUBLE_EQ(t.InWindow(2 * kHour), 5);
  // A burst after the quiet run counts whole in every window that reaches it.
  ASSERT_TRUE(t.Add(7201 * kSecond, 18));
  EXPECT_DOUBLE_EQ(t.InWindow(kSecond), 3);
  EXPECT_DOUBLE_EQ(t.InWindow(kMinute), 3);
  EXPECT_DOUBLE_EQ(t.InWindow(kHour), 3);
}

}  // namespace
}  // namespace hangar::health
