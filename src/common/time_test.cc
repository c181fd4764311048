#include "common/time.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>

namespace hangar {
namespace {

TEST(DurationTest, ParsesUnits) {
  EXPECT_EQ(*ParseDuration("90s"), 90 * kSecond);
  EXPECT_EQ(*ParseDuration("15m"), 15 * kMinute);
  EXPECT_EQ(*ParseDuration("2h"), 2 * kHour);
  EXPECT_EQ(*ParseDuration("1d"), kDay);
  EXPECT_EQ(*ParseDuration("1h30m"), 90 * kMinute);
  EXPECT_EQ(*ParseDuration("250ms"), 250);
  EXPECT_EQ(*ParseDuration("30"), 30 * kSecond);
  EXPECT_EQ(*ParseDuration("1.5h"), 90 * kMinute);
}

TEST(DurationTest, RejectsGarbageWithAHint) {
  for (auto bad : {"", "abc", "5x", "h", "1h5"}) {
    auto r = ParseDuration(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_NE(r.status().message().find("90s, 15m"), std::string::npos);
  }
}

// Found by fuzz/rest_query_fuzz.cc (UBSan: a double outside int64's range converted): parts that
// are too long, or that add up past int64, were taken (three 9e18 ms parts wrapped to a
// positive 8.5e18). Anything past 100 years is refused with the limit.
TEST(DurationTest, RefusesDurationsPastTheLimitInsteadOfWrapping) {
  EXPECT_EQ(*ParseDuration("36500d"), 36500 * kDay);
  for (auto big :
       {"36501d", "173300000173300000",
        "9000000000000000000ms9000000000000000000ms9000000000000000000ms", "36000d36000d"}) {
    auto r = ParseDuration(big);
    ASSERT_FALSE(r.ok()) << big << " gave " << *r;
    EXPECT_NE(r.status().message().find("longer than 36500 days (100 years)"), std::string::npos)
        << r.status().message();
  }
}

// Found by fuzz/rest_query_fuzz.cc (UBSan: signed overflow): a year of ten digits overflowed the
// milliseconds and came back as some other time.
TEST(TimestampTest, RefusesYearsPastFourDigits) {
  EXPECT_TRUE(ParseUtcTimestamp("9999-12-31 23:59:59").ok());
  auto r = ParseUtcTimestamp("1716500263-02-01");
  ASSERT_FALSE(r.ok()) << *r;
  EXPECT_NE(r.status().message().find("is not a valid date and time"), std::string::npos)
      << r.status().message();
}

// Found by fuzz/rest_query_fuzz.cc again (UBSan: signed overflow): a from_chars field takes a
// sign, so a year of -766666666 overflowed too, and a negative hour, minute or second went
// through as a time before the day began.
TEST(TimestampTest, RefusesNegativeFields) {
  EXPECT_TRUE(ParseUtcTimestamp("0000-01-01").ok());
  for (const char* bad : {"-766666666-1-1", "-1-01-01", "2020-01-01 -5:00:00",
                          "2020-01-01 05:-1:00", "2020-01-01 05:00:-7"}) {
    auto r = ParseUtcTimestamp(bad);
    ASSERT_FALSE(r.ok()) << bad << " -> " << *r;
    EXPECT_NE(r.status().message().find("is not a valid date and time; write YYYY-MM-DD"),
              std::string::npos)
        << r.status().message();
  }
}

TEST(DurationTest, Formats) {
  EXPECT_EQ(FormatDuration(250), "250ms");
  EXPECT_EQ(FormatDuration(42 * kSecond), "42s");
  EXPECT_EQ(FormatDuration(90 * kMinute), "1h30m");
  EXPECT_EQ(FormatDuration(26 * kHour), "1d2h");
  EXPECT_EQ(FormatDuration(kNever), "never");
}

TEST(TimestampTest, ParsesUtc) {
  EXPECT_EQ(*ParseUtcTimestamp("1970-01-01"), 0);
  EXPECT_EQ(*ParseUtcTimestamp("1970-01-02 00:00:01"), kDay + kSecond);
  EXPECT_EQ(*ParseUtcTimestamp("2017-10-09 07:01:55"), 1507532515LL * 1000);
  EXPECT_EQ(FormatUtcTimestamp(1507532515LL * 1000), "2017-10-09T07:01:55Z");
  EXPECT_FALSE(ParseUtcTimestamp("2017/10/09").ok());
  EXPECT_EQ(*ParseUtcTimestamp("2017-10-09T07:01:55Z"),
            1507532515LL * 1000);                            // the rest is ignored
  EXPECT_FALSE(ParseUtcTimestamp("2017-10-09 07:01").ok());  // a time needs its seconds
  EXPECT_FALSE(ParseUtcTimestamp("2017-10").ok());
  EXPECT_FALSE(ParseUtcTimestamp("").ok());
  EXPECT_FALSE(ParseUtcTimestamp("2017-13-09").ok());
}

TEST(ManualClockTest, OnlyMovesWhenTold) {
  ManualClock clock(100);
  EXPECT_EQ(clock.Now(), 100);
  clock.Advance(50);
  EXPECT_EQ(clock.Now(), 150);
}

}  // namespace
}  // namespace hangar

namespace hangar {
namespace {

// Issue 15, item 10: time in the daemons never steps with the wall clock.
TEST(SystemClockTest, MovesWithTheMonotonicClockFromOneWallReading) {
  EXPECT_EQ(SystemClock::Anchored(1'000'000, 5'000'000'000, 8'500'000'000), 1'003'500);
  const Time a = SystemClock::Default()->Now();
  const Time wall = std::chrono::duration_cast<std::chrono::milliseconds>(
                        std::chrono::system_clock::now().time_since_epoch())
                        .count();
  EXPECT_LT(std::abs(a - wall), 5'000) << "anchored to the wall clock at the start";
  Time last = a;
  for (int i = 0; i < 1000; ++i) {
    const Time t = SystemClock::Default()->Now();
    EXPECT_GE(t, last);
    last = t;
  }
}

}  // namespace
}  // namespace hangar
