// Slurm's value syntaxes (times, sizes, dependencies, signals, arrays), as sbatch_script.h
// declares them.
#include <algorithm>
#include <charconv>
#include <csignal>
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

}  // namespace hangar::cli::sbatch
