#include "job/progress_spec.h"

#include <cmath>
#include <string>

namespace hangar::job {

namespace {

constexpr std::string_view kKeys[] = {"hang_timeout", "on_hang", "straggler_factor",
                                      "straggler_reports"};

// A number written as a number or as text ("1.5"); nullopt when it is neither.
std::optional<double> Number(const nlohmann::json& v) {
  if (v.is_number()) return v.get<double>();
  if (!v.is_string()) return std::nullopt;
  const std::string s = v.get<std::string>();
  size_t used = 0;
  double d = 0;
  try {
    d = std::stod(s, &used);
  } catch (...) {
    return std::nullopt;
  }
  if (used != s.size() || !std::isfinite(d)) return std::nullopt;
  return d;
}

}  // namespace

std::string_view HangActionName(HangAction a) {
  switch (a) {
    case HangAction::kRestart:
      return "restart";
    case HangAction::kFail:
      return "fail";
    case HangAction::kNotify:
      return "notify";
  }
  return "restart";
}

StatusOr<ProgressSpec> ProgressSpecFromJson(const nlohmann::json& j) {
  if (!j.is_object()) {
    return Status::InvalidArgument(
        "progress must be a map, such as {hang_timeout: 10m, on_hang: restart}");
  }
  for (const auto& [k, v] : j.items()) {
    bool known = false;
    for (auto key : kKeys) known = known || key == k;
    if (!known) {
      return Status::InvalidArgument(
          "unknown field '" + k +
          "' in progress; it takes hang_timeout, on_hang, straggler_factor and "
          "straggler_reports");
    }
  }
  ProgressSpec p;
  if (j.contains("hang_timeout")) {
    const auto& v = j["hang_timeout"];
    auto d = v.is_string() ? ParseDuration(v.get<std::string>())
                           : StatusOr<Duration>(Status::InvalidArgument(""));
    if (!d.ok() || *d < kSecond) {
      return Status::InvalidArgument(
          "progress.hang_timeout must be a duration of at least 1s, such as 10m");
    }
    p.hang_timeout = *d;
  }
  if (j.contains("on_hang")) {
    const std::string a = j["on_hang"].is_string() ? j["on_hang"].get<std::string>() : "";
    if (a == "restart")
      p.on_hang = HangAction::kRestart;
    else if (a == "fail")
      p.on_hang = HangAction::kFail;
    else if (a == "notify")
      p.on_hang = HangAction::kNotify;
    else
      return Status::InvalidArgument("progress.on_hang must be restart, fail or notify, not '" +
                                     j["on_hang"].dump() + "'");
  }
  if (j.contains("straggler_factor")) {
    auto f = Number(j["straggler_factor"]);
    if (!f || *f < 1.05 || *f > 100) {
      return Status::InvalidArgument(
          "progress.straggler_factor must be a number from 1.05 to 100, such as 1.5 "
          "(a rank this many times slower than the gang's median)");
    }
    p.straggler_factor_milli = std::llround(*f * 1000);
  }
  if (j.contains("straggler_reports")) {
    auto n = Number(j["straggler_reports"]);
    if (!n || *n < 1 || *n > ProgressSpec::kMaxStragglerReports || *n != std::floor(*n)) {
      return Status::InvalidArgument(
          "progress.straggler_reports must be a whole number from 1 to " +
          std::to_string(ProgressSpec::kMaxStragglerReports));
    }
    p.straggler_reports = static_cast<int>(*n);
  }
  if (p.empty()) {
    return Status::InvalidArgument(
        "progress names neither hang_timeout nor straggler_factor; give one, such as "
        "hang_timeout: 10m, or leave progress out");
  }
  return p;
}

nlohmann::json ProgressSpecToJson(const ProgressSpec& p) {
  nlohmann::json j = nlohmann::json::object();
  if (p.empty()) return j;
  if (p.hang_timeout) j["hang_timeout"] = std::to_string(p.hang_timeout) + "ms";
  j["on_hang"] = std::string(HangActionName(p.on_hang));
  if (p.straggler_factor_milli) {
    j["straggler_factor"] = static_cast<double>(p.straggler_factor_milli) / 1000;
    j["straggler_reports"] = p.straggler_reports;
  }
  return j;
}

}  // namespace hangar::job
