#include "common/time.h"

#include <cctype>
#include <charconv>
#include <chrono>
#include <cstdio>
#include <ctime>

namespace hangar {

Time SystemClock::Now() const {
  using namespace std::chrono;
  struct Anchor {
    int64_t mono = MonotonicNanos();
    Time wall = duration_cast<milliseconds>(system_clock::now().time_since_epoch()).count();
  };
  static const Anchor anchor;
  return Anchored(anchor.wall, anchor.mono, MonotonicNanos());
}

SystemClock* SystemClock::Default() {
  static SystemClock clock;
  return &clock;
}

int64_t MonotonicNanos() {
  using namespace std::chrono;
  return duration_cast<nanoseconds>(steady_clock::now().time_since_epoch()).count();
}

StatusOr<Duration> ParseDuration(std::string_view text) {
  auto bad = [&] {
    return Status::InvalidArgument("'" + std::string(text) +
                                   "' is not a duration; write it like 90s, 15m, 2h, 1d or 1h30m");
  };
  if (text.empty()) return bad();
  Duration total = 0;
  size_t i = 0;
  bool any = false;
  while (i < text.size()) {
    size_t start = i;
    while (i < text.size() && (std::isdigit(static_cast<unsigned char>(text[i])) || text[i] == '.'))
      ++i;
    if (start == i) return bad();
    double value = 0;
    auto [p, ec] = std::from_chars(text.data() + start, text.data() + i, value);
    if (ec != std::errc() || p != text.data() + i) return bad();
    size_t unit_start = i;
    while (i < text.size() && std::isalpha(static_cast<unsigned char>(text[i]))) ++i;
    std::string_view unit = text.substr(unit_start, i - unit_start);
    double scale;
    if (unit.empty() || unit == "s")
      scale = kSecond;
    else if (unit == "ms")
      scale = 1;
    else if (unit == "m" || unit == "min")
      scale = kMinute;
    else if (unit == "h")
      scale = kHour;
    else if (unit == "d")
      scale = kDay;
    else
      return bad();
    if (unit.empty() && any) return bad();
    // Bounded before the conversion: a double beyond int64's range does not convert, and the sum
    // of parts must not wrap around to a plausible duration.
    const double ms = value * scale;
    if (!(ms <= static_cast<double>(kMaxDuration)) ||
        total + static_cast<Duration>(ms + 0.5) > kMaxDuration) {
      return Status::InvalidArgument(
          "'" + std::string(text) +
          "' is longer than 36500 days (100 years), the longest duration Hangar takes");
    }
    total += static_cast<Duration>(ms + 0.5);
    any = true;
  }
  return total;
}

std::string FormatDuration(Duration d) {
  if (d == kNever) return "never";
  std::string sign = d < 0 ? "-" : "";
  if (d < 0) d = -d;
  char buf[64];
  if (d < kSecond) {
    std::snprintf(buf, sizeof buf, "%lldms", static_cast<long long>(d));
  } else if (d < kMinute) {
    std::snprintf(buf, sizeof buf, "%llds", static_cast<long long>(d / kSecond));
  } else if (d < kHour) {
    long long m = d / kMinute, s = (d % kMinute) / kSecond;
    if (s)
      std::snprintf(buf, sizeof buf, "%lldm%llds", m, s);
    else
      std::snprintf(buf, sizeof buf, "%lldm", m);
  } else if (d < kDay) {
    long long h = d / kHour, m = (d % kHour) / kMinute;
    if (m)
      std::snprintf(buf, sizeof buf, "%lldh%lldm", h, m);
    else
      std::snprintf(buf, sizeof buf, "%lldh", h);
  } else {
    long long days = d / kDay, h = (d % kDay) / kHour;
    if (h)
      std::snprintf(buf, sizeof buf, "%lldd%lldh", days, h);
    else
      std::snprintf(buf, sizeof buf, "%lldd", days);
  }
  return sign + buf;
}

namespace {
// Reads "Y-M-D", then optionally spaces or a 'T' and "h:m:s" (anything after is ignored); the
// count of fields read, as sscanf("%d-%d-%d%*[ T]%d:%d:%d") counts them, without its cost (a
// trace of 100,000 rows reads as many timestamps).
int ReadDateFields(std::string_view t, int* f) {
  const char* p = t.data();
  const char* end = p + t.size();
  auto field = [&](int k, char after) {
    auto [next, ec] = std::from_chars(p, end, f[k]);
    if (ec != std::errc()) return false;
    p = next;
    if (after == 0) return true;
    if (p == end || *p != after) return false;
    ++p;
    return true;
  };
  if (!field(0, '-') || !field(1, '-')) return 0;
  if (!field(2, 0)) return 2;
  const char* gap = p;
  while (p < end && (*p == ' ' || *p == 'T')) ++p;
  if (p == gap) return 3;
  if (!field(3, ':')) return 3;
  if (!field(4, ':')) return 5;
  return field(5, 0) ? 6 : 5;
}
}  // namespace

StatusOr<Time> ParseUtcTimestamp(std::string_view text) {
  int f[6] = {0, 0, 0, 0, 0, 0};
  const int n = ReadDateFields(text, f);
  if (n != 3 && n != 6) {
    const std::string t(text);
    return Status::InvalidArgument("'" + t +
                                   "' is not a date; write YYYY-MM-DD or YYYY-MM-DD HH:MM:SS");
  }
  int y = f[0], mo = f[1], d = f[2], h = f[3], mi = f[4], s = f[5];
  // Years 0 to 9999: beyond them the milliseconds overflow int64 (and no record is that old or
  // new). Each field reads a sign: none may be negative.
  if (y < 0 || y > 9999 || mo < 1 || mo > 12 || d < 1 || d > 31 || h < 0 || h > 23 || mi < 0 ||
      mi > 59 || s < 0 || s > 60) {
    return Status::InvalidArgument("'" + std::string(text) +
                                   "' is not a valid date and time; write YYYY-MM-DD or "
                                   "YYYY-MM-DD HH:MM:SS (UTC, years 0000 to 9999)");
  }
  // Days from civil (Howard Hinnant's algorithm), UTC.
  y -= mo <= 2;
  const int era = (y >= 0 ? y : y - 399) / 400;
  const unsigned yoe = static_cast<unsigned>(y - era * 400);
  const unsigned doy = (153 * (mo + (mo > 2 ? -3 : 9)) + 2) / 5 + d - 1;
  const unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  const int64_t days = static_cast<int64_t>(era) * 146097 + static_cast<int64_t>(doe) - 719468;
  return ((days * 24 + h) * 60 + mi) * 60 * kSecond + s * kSecond;
}

std::string FormatUtcTimestamp(Time t) {
  std::time_t secs = static_cast<std::time_t>(t / kSecond);
  std::tm tm{};
  gmtime_r(&secs, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

}  // namespace hangar
