// Slurm's value syntaxes (times, sizes, dependencies, signals, arrays), as sbatch_script.h
// declares them.
#include <algorithm>
#include <cctype>
#include <charconv>
#include <csignal>
#include <cstdio>
#include <ctime>
#include <set>

#include "cli/sbatch_script.h"
#include "job/job_spec.h"

namespace hangar::cli::sbatch {

namespace {

Status Err(const std::string& what) { return Status::InvalidArgument(what); }

// Digits only, as a number; nullopt otherwise (empty, signs, overflow).
std::optional<int64_t> Digits(std::string_view s) {
  int64_t v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (s.empty() || ec != std::errc() || p != s.data() + s.size() || s[0] == '-' || s[0] == '+')
    return std::nullopt;
  return v;
}

std::vector<std::string_view> SplitOn(std::string_view s, char sep) {
  std::vector<std::string_view> parts;
  size_t start = 0;
  while (true) {
    const size_t at = s.find(sep, start);
    parts.push_back(
        s.substr(start, at == std::string_view::npos ? std::string_view::npos : at - start));
    if (at == std::string_view::npos) return parts;
    start = at + 1;
  }
}

}  // namespace

StatusOr<Duration> ParseSlurmTime(std::string_view text) {
  if (text == "UNLIMITED" || text == "INFINITE" || text == "unlimited" || text == "infinite")
    return Duration{0};
  auto bad = [&] {
    return Err("'" + std::string(text) +
               "' is not a Slurm time; write minutes, MM:SS, HH:MM:SS, D-HH, D-HH:MM or "
               "D-HH:MM:SS");
  };
  std::string_view rest = text;
  int64_t days = 0;
  const size_t dash = text.find('-');
  if (dash != std::string_view::npos) {
    auto d = Digits(text.substr(0, dash));
    if (!d) return bad();
    days = *d;
    rest = text.substr(dash + 1);
  }
  std::vector<int64_t> parts;
  for (auto p : SplitOn(rest, ':')) {
    auto v = Digits(p);
    if (!v || *v > 1000000) return bad();
    parts.push_back(*v);
  }
  int64_t seconds = 0;
  if (dash != std::string_view::npos) {  // D-HH, D-HH:MM, D-HH:MM:SS
    if (parts.size() > 3) return bad();
    const int64_t scale[] = {3600, 60, 1};
    for (size_t i = 0; i < parts.size(); ++i) seconds += parts[i] * scale[i];
    seconds += days * 86400;
  } else if (parts.size() == 1) {
    seconds = parts[0] * 60;
  } else if (parts.size() == 2) {
    seconds = parts[0] * 60 + parts[1];
  } else if (parts.size() == 3) {
    seconds = parts[0] * 3600 + parts[1] * 60 + parts[2];
  } else {
    return bad();
  }
  return seconds * kSecond;
}

StatusOr<int64_t> ParseSlurmMemoryMiB(std::string_view written) {
  std::string_view text = written;
  // 64GB and 2gb, as submitit and many site guides write them, read as 64G and 2G.
  if (text.size() >= 3 && (text.back() == 'B' || text.back() == 'b') &&
      std::isalpha(static_cast<unsigned char>(text[text.size() - 2])))
    text.remove_suffix(1);
  std::string_view num = text;
  int64_t scale_kib = 1024;  // M, the default
  if (!text.empty() && std::isalpha(static_cast<unsigned char>(text.back()))) {
    const char u = static_cast<char>(std::toupper(static_cast<unsigned char>(text.back())));
    num.remove_suffix(1);
    if (u == 'K')
      scale_kib = 1;
    else if (u == 'M')
      scale_kib = 1024;
    else if (u == 'G')
      scale_kib = 1024 * 1024;
    else if (u == 'T')
      scale_kib = int64_t{1024} * 1024 * 1024;
    else
      num = "x";
  }
  auto v = Digits(num);
  if (!v || *v > (int64_t{1} << 40) / scale_kib) {
    return Err("'" + std::string(written) +
               "' is not a Slurm size; write a whole number with K, M (the default), G or T, "
               "e.g. 64G");
  }
  return (*v * scale_kib + 1023) / 1024;
}

StatusOr<Dependencies> ParseDependency(std::string_view text, bool* singleton) {
  if (text.find('?') != std::string_view::npos) {
    return Err(
        "'?' (any one of the dependencies) is not supported; Hangar waits for all of them: join "
        "them with ','");
  }
  Dependencies deps;
  for (auto item : SplitOn(text, ',')) {
    auto fields = SplitOn(item, ':');
    const std::string_view type = fields[0];
    std::vector<uint64_t>* list = type == "afterok"      ? &deps.ok
                                  : type == "afterany"   ? &deps.any
                                  : type == "afternotok" ? &deps.notok
                                                         : nullptr;
    if (type == "after")
      return Err(
          "'after' (once the job has started) has no Hangar equivalent; use afterok or afterany");
    if (type == "singleton" && fields.size() == 1) {
      if (!singleton)
        return Err("'singleton' (one job of this name at a time) has no Hangar equivalent");
      *singleton = true;
      continue;
    }
    if (type == "aftercorr")
      return Err(
          "'aftercorr' (element by element) is not supported; afterok:ID waits for the whole "
          "array");
    if (!list)
      return Err("'" + std::string(type) +
                 "' is not a dependency type hangar sbatch reads: afterok, afterany, afternotok");
    if (fields.size() < 2)
      return Err("'" + std::string(item) + "' names no job; write e.g. afterok:12:13");
    for (size_t i = 1; i < fields.size(); ++i) {
      if (fields[i].find('_') != std::string_view::npos) {
        return Err("'" + std::string(fields[i]) +
                   "': a dependency on one array element is not supported; depend on the "
                   "whole array (its job id)");
      }
      auto id = Digits(fields[i]);
      if (!id || *id == 0)
        return Err("'" + std::string(fields[i]) +
                   "' is not a job id (a number: see `hangar jobs`)");
      const uint64_t v = static_cast<uint64_t>(*id);
      if (std::find(list->begin(), list->end(), v) == list->end()) list->push_back(v);
    }
  }
  return deps;
}

StatusOr<SignalRequest> ParseSignalRequest(std::string_view text) {
  SignalRequest r;
  std::string_view s = text;
  if (s.rfind("R:", 0) == 0 || s.rfind("BR:", 0) == 0 || s.rfind("RB:", 0) == 0) {
    return Err("R: (a reservation's end) has no meaning in Hangar; write [B:]SIG@SECONDS");
  }
  if (s.rfind("B:", 0) == 0) r.batch_only = true, s.remove_prefix(2);
  const size_t at = s.find('@');
  const std::string sig(s.substr(0, at));
  auto num = job::ParseSignal(sig);
  if (!num) return Err("'" + sig + "' is not a signal; write e.g. USR1@120");
  if (*num == SIGKILL || *num == SIGSTOP)
    return Err("the warning signal cannot be KILL or STOP (they cannot be caught)");
  r.signal = *num;
  if (at != std::string_view::npos) {
    auto secs = Digits(s.substr(at + 1));
    if (!secs || *secs > 65535)
      return Err("'" + std::string(s.substr(at + 1)) + "' is not a number of seconds (0 to 65535)");
    r.before_end = *secs * kSecond;
  }
  return r;
}

StatusOr<ArraySpec> ParseArraySpec(std::string_view text) {
  auto bad = [&](const std::string& why) {
    return Err("'" + std::string(text) + "' is not an array spec (" + why +
               "); write e.g. 0-49, 0-49:2, 0-49%8 or 1,3,5-7");
  };
  ArraySpec spec;
  std::string_view body = text;
  if (const size_t pct = text.find('%'); pct != std::string_view::npos) {
    auto cap = Digits(text.substr(pct + 1));
    if (!cap || *cap < 1 || *cap > 100000) return bad("the cap after % is a count of at least 1");
    spec.max_running = static_cast<int>(*cap);
    body = text.substr(0, pct);
  }
  std::set<uint32_t> seen;
  for (auto item : SplitOn(body, ',')) {
    auto range = SplitOn(SplitOn(item, ':')[0], '-');
    auto step_part = SplitOn(item, ':');
    if (range.size() > 2 || step_part.size() > 2) return bad("'" + std::string(item) + "'");
    // As in Slurm and the job file's `array:` (which gets this text): a step only follows a range.
    if (step_part.size() == 2 && range.size() != 2) return bad("a step needs a range, e.g. 0-48:2");
    auto lo = Digits(range[0]);
    auto hi = range.size() == 2 ? Digits(range[1]) : lo;
    auto step = step_part.size() == 2 ? Digits(step_part[1]) : std::optional<int64_t>(1);
    if (!lo || !hi || !step) return bad("'" + std::string(item) + "'");
    if (*hi < *lo || *step < 1 || *hi > 4000000)
      return bad("'" + std::string(item) + "' runs backwards or past 4000000");
    for (int64_t i = *lo; i <= *hi; i += *step) {
      seen.insert(static_cast<uint32_t>(i));
      if (seen.size() > 100000) return bad("more than 100000 elements");
    }
  }
  spec.indices.assign(seen.begin(), seen.end());
  return spec;
}

namespace {

// The local time `t` (Unix ms) broken down, and back: --begin is read in this machine's zone, as
// sbatch reads it.
std::tm Local(Time t) {
  const std::time_t secs = static_cast<std::time_t>(t / kSecond);
  std::tm tm{};
  localtime_r(&secs, &tm);
  return tm;
}

StatusOr<Time> FromLocal(std::tm tm) {
  tm.tm_isdst = -1;
  const std::time_t secs = std::mktime(&tm);
  if (secs == static_cast<std::time_t>(-1)) return Err("not a time this machine can represent");
  return static_cast<Time>(secs) * kSecond;
}

// Today's date (of `now`) at h:m:s, or tomorrow's when that has passed.
StatusOr<Time> NextAt(Time now, int h, int m, int s) {
  std::tm tm = Local(now);
  tm.tm_hour = h, tm.tm_min = m, tm.tm_sec = s;
  HANGAR_ASSIGN_OR_RETURN(Time at, FromLocal(tm));
  if (at > now) return at;
  tm.tm_mday += 1;
  return FromLocal(tm);
}

}  // namespace

StatusOr<Time> ParseSlurmBegin(std::string_view written, Time now) {
  std::string t(written);
  std::transform(t.begin(), t.end(), t.begin(), [](unsigned char c) { return std::tolower(c); });
  const Status bad =
      Err("'" + std::string(written) +
          "' is not a time sbatch reads: write now+30minutes, 22:00, 10:00pm, tomorrow, midnight, "
          "2026-12-24 or 2026-12-24T18:00:00");
  if (t.rfind("now", 0) == 0) {
    if (t.size() == 3) return now;
    if (t[3] != '+') return bad;
    size_t i = 4;
    while (i < t.size() && std::isdigit(static_cast<unsigned char>(t[i]))) ++i;
    const std::optional<int64_t> n = Digits(std::string_view(t).substr(4, i - 4));
    if (!n || *n > 100000000) return bad;
    const std::string unit = t.substr(i);
    static const std::pair<const char*, Duration> kUnits[] = {
        {"", kSecond},       {"s", kSecond},       {"sec", kSecond},     {"secs", kSecond},
        {"second", kSecond}, {"seconds", kSecond}, {"m", kMinute},       {"min", kMinute},
        {"mins", kMinute},   {"minute", kMinute},  {"minutes", kMinute}, {"h", kHour},
        {"hour", kHour},     {"hours", kHour},     {"d", kDay},          {"day", kDay},
        {"days", kDay},      {"w", 7 * kDay},      {"week", 7 * kDay},   {"weeks", 7 * kDay}};
    for (const auto& [name, size] : kUnits) {
      if (unit == name) return now + *n * size;
    }
    return bad;
  }
  static const std::pair<const char*, int> kNamed[] = {
      {"midnight", 0}, {"elevenses", 11}, {"noon", 12}, {"fika", 15}, {"teatime", 16}};
  for (const auto& [name, hour] : kNamed) {
    if (t == name) return NextAt(now, hour, 0, 0);
  }
  if (t == "today") return now;
  if (t == "tomorrow") {
    std::tm tm = Local(now);
    tm.tm_hour = tm.tm_min = tm.tm_sec = 0;
    tm.tm_mday += 1;
    return FromLocal(tm);
  }
  int f[6] = {0, 0, 0, 0, 0, 0};
  // YYYY-MM-DD[THH:MM[:SS]]
  if (t.size() >= 10 && t[4] == '-' && t[7] == '-') {
    const int n =
        std::sscanf(t.c_str(), "%4d-%2d-%2dt%2d:%2d:%2d", &f[0], &f[1], &f[2], &f[3], &f[4], &f[5]);
    const size_t want = n == 3 ? 10 : n == 5 ? 16 : n == 6 ? 19 : 0;
    if (want == 0 || t.size() != want || f[1] < 1 || f[1] > 12 || f[2] < 1 || f[2] > 31 ||
        f[3] > 23 || f[4] > 59 || f[5] > 59)
      return bad;
    std::tm tm{};
    tm.tm_year = f[0] - 1900, tm.tm_mon = f[1] - 1, tm.tm_mday = f[2];
    tm.tm_hour = f[3], tm.tm_min = f[4], tm.tm_sec = f[5];
    return FromLocal(tm);
  }
  // HH:MM[:SS][am|pm]
  if (t.find(':') != std::string::npos) {
    std::string clock = t;
    int add = -1;  // 12-hour clock: 0 for am, 12 for pm
    for (const auto& [suffix, plus] : {std::pair{"am", 0}, std::pair{"pm", 12}}) {
      if (clock.size() > 2 && clock.compare(clock.size() - 2, 2, suffix) == 0) {
        clock = clock.substr(0, clock.size() - 2);
        while (!clock.empty() && clock.back() == ' ') clock.pop_back();
        add = plus;
      }
    }
    char extra = 0;
    const int n = std::sscanf(clock.c_str(), "%2d:%2d:%2d%c", &f[0], &f[1], &f[2], &extra);
    if (n != 2 && n != 3) return bad;
    if (add >= 0) {
      if (f[0] < 1 || f[0] > 12) return bad;
      f[0] = f[0] % 12 + add;
    }
    if (f[0] > 23 || f[1] > 59 || f[2] > 59) return bad;
    return NextAt(now, f[0], f[1], f[2]);
  }
  // MM/DD[/YY], MM.DD[.YY], MMDD[YY]: that day's midnight.
  std::string digits;
  for (char c : t) {
    if (c != '/' && c != '.') digits += c;
  }
  if ((digits.size() == 4 || digits.size() == 6) &&
      digits.find_first_not_of("0123456789") == std::string::npos &&
      (t.find_first_of("/.") == std::string::npos || t.size() == digits.size() + 1 ||
       t.size() == digits.size() + 2)) {
    std::tm tm = Local(now);
    tm.tm_mon = std::stoi(digits.substr(0, 2)) - 1;
    tm.tm_mday = std::stoi(digits.substr(2, 2));
    if (digits.size() == 6) tm.tm_year = 100 + std::stoi(digits.substr(4, 2));
    if (tm.tm_mon < 0 || tm.tm_mon > 11 || tm.tm_mday < 1 || tm.tm_mday > 31) return bad;
    tm.tm_hour = tm.tm_min = tm.tm_sec = 0;
    return FromLocal(tm);
  }
  return bad;
}

}  // namespace hangar::cli::sbatch
