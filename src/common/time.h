// Time in Hangar is an integer count of milliseconds. The scheduler never reads a clock: time
// comes in as an argument. Daemons read it through the Clock seam; tests use ManualClock.
#pragma once

#include <atomic>
#include <cstdint>
#include <limits>
#include <string>
#include <string_view>

#include "common/status.h"

namespace hangar {

using Time = int64_t;      // milliseconds since the Unix epoch (or since a simulation's start)
using Duration = int64_t;  // milliseconds

inline constexpr Time kNever = std::numeric_limits<int64_t>::max();
inline constexpr Duration kSecond = 1000;
inline constexpr Duration kMinute = 60 * kSecond;
inline constexpr Duration kHour = 60 * kMinute;
inline constexpr Duration kDay = 24 * kHour;

class Clock {
 public:
  virtual ~Clock() = default;
  virtual Time Now() const = 0;
};

// Unix milliseconds that never step: the wall clock read once, when the process first asks, then
// moved on by the monotonic clock. Heartbeat intervals, timeouts and token expiry measured with
// it are immune to the wall clock being stepped (by an operator, or NTP at boot): a controller
// whose clock jumps an hour ahead does not lose its fleet, and an agent whose clock jumps back
// keeps beating. (NTP's gradual slewing moves the monotonic clock as well.)
class SystemClock final : public Clock {
 public:
  Time Now() const override;
  static SystemClock* Default();
  // The rule, for tests: the wall time at the anchor plus the monotonic time since it.
  static Time Anchored(Time wall_at_anchor, int64_t mono_ns_at_anchor, int64_t mono_ns_now) {
    return wall_at_anchor + (mono_ns_now - mono_ns_at_anchor) / 1'000'000;
  }
};

// A clock that only moves when told to. Thread-safe.
class ManualClock final : public Clock {
 public:
  explicit ManualClock(Time start = 0) : now_(start) {}
  Time Now() const override { return now_.load(); }
  void Set(Time t) { now_.store(t); }
  void Advance(Duration d) { now_.fetch_add(d); }

 private:
  std::atomic<Time> now_;
};

// Monotonic nanoseconds, for measuring elapsed time in benchmarks and daemons.
int64_t MonotonicNanos();

// The longest duration ParseDuration takes: 36500 days (100 years).
inline constexpr Duration kMaxDuration = 36500 * kDay;
// Parses "90s", "15m", "2h", "1d", "1h30m", "250ms" or a bare number of seconds, up to
// kMaxDuration.
StatusOr<Duration> ParseDuration(std::string_view text);
// Formats as the shortest of "250ms", "42s", "15m", "2h30m", "3d4h".
std::string FormatDuration(Duration d);
// "2017-10-09 07:01:55" or "2017-10-09" (UTC) to milliseconds since the epoch.
StatusOr<Time> ParseUtcTimestamp(std::string_view text);
// Milliseconds since the epoch to "2017-10-09T07:01:55Z".
std::string FormatUtcTimestamp(Time t);

}  // namespace hangar
