#include "job/batch_spec.h"

#include <algorithm>
#include <charconv>

namespace hangar::job {

namespace {

constexpr const char* kArraySyntax =
    "write e.g. \"0-49\", \"0-48:2\" (a step), \"1,3,5-7\" or \"0-99%8\" (at most 8 elements "
    "running at once)";

StatusOr<int64_t> Number(std::string_view s, std::string_view what, std::string_view whole) {
  int64_t v = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (s.empty() || ec != std::errc() || end != s.data() + s.size() || v < 0) {
    return Status::InvalidArgument("array '" + std::string(whole) + "': '" + std::string(s) +
                                   "' is not " + std::string(what) + "; " + kArraySyntax);
  }
  return v;
}

// One comma-separated part: "N", "A-B" or "A-B:S".
struct ArrayPart {
  int64_t from = 0, to = 0, step = 1;
  int64_t count() const { return (to - from) / step + 1; }
};

StatusOr<ArrayPart> ParsePart(std::string_view part, std::string_view whole) {
  ArrayPart p;
  const size_t dash = part.find('-');
  if (dash == std::string_view::npos) {
    HANGAR_ASSIGN_OR_RETURN(p.from, Number(part, "an index", whole));
    p.to = p.from;
  } else {
    std::string_view rest = part.substr(dash + 1);
    if (size_t colon = rest.find(':'); colon != std::string_view::npos) {
      HANGAR_ASSIGN_OR_RETURN(p.step, Number(rest.substr(colon + 1), "a step", whole));
      rest = rest.substr(0, colon);
      if (p.step == 0)
        return Status::InvalidArgument("array '" + std::string(whole) +
                                       "': the step must be 1 or more");
    }
    HANGAR_ASSIGN_OR_RETURN(p.from, Number(part.substr(0, dash), "an index", whole));
    HANGAR_ASSIGN_OR_RETURN(p.to, Number(rest, "an index", whole));
    if (p.to < p.from) {
      return Status::InvalidArgument("array '" + std::string(whole) + "': range " +
                                     std::string(part) +
                                     " ends before it starts; write the lower index first");
    }
  }
  if (p.to > ArraySpec::kMaxIndex) {
    return Status::InvalidArgument("array '" + std::string(whole) + "': index " +
                                   std::to_string(p.to) + " is over the largest index, " +
                                   std::to_string(ArraySpec::kMaxIndex) +
                                   "; number the elements from 0");
  }
  return p;
}

// Calls fn(part) for each comma-separated part of `ranges`, in order.
template <typename Fn>
Status ForEachPart(std::string_view ranges, std::string_view whole, Fn&& fn) {
  size_t start = 0;
  while (start <= ranges.size()) {
    const size_t comma = std::min(ranges.find(',', start), ranges.size());
    HANGAR_ASSIGN_OR_RETURN(ArrayPart part, ParsePart(ranges.substr(start, comma - start), whole));
    HANGAR_RETURN_IF_ERROR(fn(part));
    start = comma + 1;
  }
  return Status::Ok();
}

// The ranges part of `text` (before any "%N") and the cap after it.
StatusOr<std::string_view> SplitCap(std::string_view text, int* max_running) {
  *max_running = 0;
  std::string_view ranges = text;
  if (size_t pct = text.find('%'); pct != std::string_view::npos) {
    HANGAR_ASSIGN_OR_RETURN(int64_t cap, Number(text.substr(pct + 1), "a count of elements", text));
    if (cap < 1 || cap > 1'000'000) {
      return Status::InvalidArgument("array '" + std::string(text) +
                                     "': the cap after % must be 1 or more");
    }
    *max_running = static_cast<int>(cap);
    ranges = text.substr(0, pct);
  }
  if (ranges.empty())
    return Status::InvalidArgument("array '" + std::string(text) + "' names no elements; " +
                                   kArraySyntax);
  return ranges;
}

StatusOr<uint64_t> JobId(const nlohmann::json& v, std::string_view kind) {
  if (v.is_number_unsigned()) return v.get<uint64_t>();
  if (v.is_string()) {
    const std::string& s = v.get_ref<const std::string&>();
    uint64_t id = 0;
    auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), id);
    if (!s.empty() && ec == std::errc() && end == s.data() + s.size()) return id;
  }
  // Replaced, not thrown on: an id given as bytes that are not UTF-8 is refused like any other.
  return Status::InvalidArgument(
      "after." + std::string(kind) + ": " +
      v.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) +
      " is not a job id; list ids such as [12, 13] (an array's id means all its elements)");
}

}  // namespace

StatusOr<size_t> CountArrayElements(std::string_view text) {
  int max_running = 0;
  HANGAR_ASSIGN_OR_RETURN(std::string_view ranges, SplitCap(text, &max_running));
  int64_t total = 0;
  HANGAR_RETURN_IF_ERROR(ForEachPart(ranges, text, [&](const ArrayPart& p) -> Status {
    total += p.count();  // each part at most kMaxIndex + 1: no overflow before the check below
    if (total > static_cast<int64_t>(ArraySpec::kMaxElements)) {
      return Status::InvalidArgument(
          "array '" + std::string(text.substr(0, 40)) + (text.size() > 40 ? "..." : "") +
          "' has more than " + std::to_string(ArraySpec::kMaxElements) +
          " elements (counting each part as written); split it into several arrays");
    }
    return Status::Ok();
  }));
  return static_cast<size_t>(total);
}

StatusOr<ArraySpec> ParseArraySpec(std::string_view text) {
  // Every limit is checked on the text before a single index is expanded.
  HANGAR_ASSIGN_OR_RETURN(size_t count, CountArrayElements(text));
  ArraySpec a;
  a.text = std::string(text);
  HANGAR_ASSIGN_OR_RETURN(std::string_view ranges, SplitCap(text, &a.max_running));
  a.indices.reserve(count);
  HANGAR_RETURN_IF_ERROR(ForEachPart(ranges, text, [&](const ArrayPart& p) -> Status {
    for (int64_t k = 0, n = p.count(); k < n; ++k) a.indices.push_back(p.from + k * p.step);
    return Status::Ok();
  }));
  std::sort(a.indices.begin(), a.indices.end());
  a.indices.erase(std::unique(a.indices.begin(), a.indices.end()), a.indices.end());
  return a;
}

std::string_view DependencyKindName(DependencyKind k) {
  switch (k) {
    case DependencyKind::kOk:
      return "ok";
    case DependencyKind::kAny:
      return "any";
    case DependencyKind::kNotOk:
      return "notok";
  }
  return "?";
}

const std::vector<uint64_t>& Dependencies::of(DependencyKind k) const {
  return k == DependencyKind::kOk ? ok : k == DependencyKind::kAny ? any : notok;
}

nlohmann::json Dependencies::ToJson() const {
  nlohmann::json j = nlohmann::json::object();
  if (!ok.empty()) j["ok"] = ok;
  if (!any.empty()) j["any"] = any;
  if (!notok.empty()) j["notok"] = notok;
  return j;
}

StatusOr<Dependencies> DependenciesFromJson(const nlohmann::json& j) {
  if (!j.is_object()) {
    return Status::InvalidArgument(
        "after must be a map such as {ok: [12], any: [13], notok: [14]}");
  }
  Dependencies d;
  for (const auto& [key, list] : j.items()) {
    std::vector<uint64_t>* into = key == "ok"      ? &d.ok
                                  : key == "any"   ? &d.any
                                  : key == "notok" ? &d.notok
                                                   : nullptr;
    if (!into) {
      return Status::InvalidArgument(
          "after." + key +
          " is not a kind of dependency; use ok (succeeded), any (ended) "
          "or notok (failed, cancelled or timed out)");
    }
    if (!list.is_array()) {
      if (list.is_null()) continue;
      HANGAR_ASSIGN_OR_RETURN(uint64_t id, JobId(list, key));
      into->push_back(id);
      continue;
    }
    for (const auto& v : list) {
      HANGAR_ASSIGN_OR_RETURN(uint64_t id, JobId(v, key));
      into->push_back(id);
    }
  }
  if (d.size() > 1000)
    return Status::InvalidArgument(
        "after names more than 1000 jobs; depend on an array's id instead");
  return d;
}

StatusOr<Dependencies> ParseDependencyFlag(std::string_view text) {
  nlohmann::json j = nlohmann::json::object();
  size_t start = 0;
  while (start < text.size()) {
    const size_t comma = std::min(text.find(',', start), text.size());
    std::string_view part = text.substr(start, comma - start);
    start = comma + 1;
    const size_t colon = part.find(':');
    std::string kind(part.substr(0, colon));
    if (kind.rfind("after", 0) == 0) kind = kind.substr(5);
    if (colon == std::string_view::npos || (kind != "ok" && kind != "any" && kind != "notok")) {
      return Status::InvalidArgument(
          "dependency '" + std::string(part) +
          "' must be KIND:ID[:ID...] with KIND ok, any or notok, e.g. ok:12:13,any:14");
    }
    std::string_view ids = part.substr(colon + 1);
    size_t s = 0;
    while (s <= ids.size()) {
      const size_t c = std::min(ids.find(':', s), ids.size());
      j[kind].push_back(std::string(ids.substr(s, c - s)));
      s = c + 1;
    }
  }
  if (j.empty())
    return Status::InvalidArgument("the dependency is empty; write e.g. ok:12:13,any:14");
  return DependenciesFromJson(j);
}

StatusOr<Time> ParseBeginTime(std::string_view text) {
  std::string_view t = text;
  if (!t.empty() && (t.back() == 'Z' || t.back() == 'z')) t.remove_suffix(1);
  const bool plain = !t.empty() && t.size() <= 19 &&
                     t.find_first_not_of("0123456789-: T") == std::string_view::npos &&
                     (t.size() <= 10 || t.find_first_of("-", 10) == std::string_view::npos);
  auto when = plain ? ParseUtcTimestamp(t) : StatusOr<Time>(Status::InvalidArgument(""));
  if (!when.ok() || (t.size() > 10 && t.size() != 19)) {
    return Status::InvalidArgument("begin: '" + std::string(text) +
                                   "' is not a UTC time; write 2026-12-08T22:00:00Z (UTC) or a "
                                   "date, 2026-12-08");
  }
  return *when;
}

}  // namespace hangar::job
