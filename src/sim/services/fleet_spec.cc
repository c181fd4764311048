#include "sim/services/fleet_spec.h"

#include <cmath>
#include <fstream>
#include <sstream>

#include "common/yaml_util.h"

namespace hangar::sim {

std::string_view SurgeTierName(SurgeTier t) {
  return t == SurgeTier::kReclaim ? "reclaim" : "opportunistic";
}

namespace {

StatusOr<double> Rate(const YamlSource& src, const YAML::Node& n, std::string_view what) {
  double v = -1;
  try {
    v = n.as<double>();
  } catch (const YAML::Exception&) {
    return src.Error(n, std::string(what) + " must be a number of requests per second");
  }
  if (!std::isfinite(v) || v < 0)
    return src.Error(n, std::string(what) + " must be 0 or more requests per second");
  return v;
}

StatusOr<Duration> DurationField(const YamlSource& src, const YAML::Node& map, std::string_view key,
                                 Duration fallback) {
  HANGAR_ASSIGN_OR_RETURN(auto text, src.OptString(map, key));
  if (!text) return fallback;
  auto d = ParseDuration(*text);
  if (!d.ok()) {
    return src.Error(map[std::string(key)],
                     std::string(key) + ": '" + *text + "' is not a duration (e.g. 90s, 2m, 1h)");
  }
  return *d;
}

// "14:30" (UTC) as the time after midnight.
StatusOr<Duration> TimeOfDay(const YamlSource& src, const YAML::Node& map) {
  HANGAR_ASSIGN_OR_RETURN(auto text, src.OptString(map, "peak_at"));
  if (!text) return 14 * kHour;
  int h = -1, m = -1;
  char colon = 0, extra = 0;
  std::istringstream in(*text);
  in >> h >> colon >> m;
  if (!in || colon != ':' || (in >> extra) || h < 0 || h > 23 || m < 0 || m > 59) {
    return src.Error(map["peak_at"],
                     "peak_at: '" + *text + "' is not a time of day; write HH:MM, e.g. \"14:30\"");
  }
  return h * kHour + m * kMinute;
}

StatusOr<DemandCurve> ParseDemand(const YamlSource& src, const YAML::Node& d) {
  if (!d || !d.IsMap()) {
    return src.Error(d,
                     "demand must be a map: {shape: sine, trough_rps: R, peak_rps: R, peak_at: "
                     "\"HH:MM\"} or {shape: hourly, rps: [24 rates]}");
  }
  HANGAR_RETURN_IF_ERROR(
      src.CheckKeys(d, "demand", {"shape", "trough_rps", "peak_rps", "peak_at", "rps"}));
  HANGAR_ASSIGN_OR_RETURN(std::string shape, src.String(d, "shape"));
  if (shape == "sine") {
    if (!d["trough_rps"] || !d["peak_rps"] || d["rps"])
      return src.Error(d, "a sine demand takes trough_rps and peak_rps (and peak_at), not rps");
    HANGAR_ASSIGN_OR_RETURN(double trough, Rate(src, d["trough_rps"], "trough_rps"));
    HANGAR_ASSIGN_OR_RETURN(double peak, Rate(src, d["peak_rps"], "peak_rps"));
    if (trough > peak) return src.Error(d, "trough_rps must not be above peak_rps");
    HANGAR_ASSIGN_OR_RETURN(Duration at, TimeOfDay(src, d));
    return DemandCurve::Sine(trough, peak, at);
  }
  if (shape == "hourly") {
    const YAML::Node r = d["rps"];
    if (!r || !r.IsSequence() || r.size() != 24 || d["trough_rps"] || d["peak_rps"] ||
        d["peak_at"]) {
      return src.Error(d, "an hourly demand takes rps: a list of 24 rates, from 00:00 to 24:00");
    }
    std::vector<double> rates;
    for (const auto& v : r) {
      HANGAR_ASSIGN_OR_RETURN(double x, Rate(src, v, "each hourly rate"));
      rates.push_back(x);
    }
    return DemandCurve::Hourly(std::move(rates));
  }
  return src.Error(d["shape"], "demand shape must be sine or hourly, not '" + shape + "'");
}

Status CheckCounts(const YamlSource& src, const YAML::Node& root, const ServingFleetSpec& f) {
  if (f.min_replicas > f.max_replicas)
    return src.Error(root, "min_replicas must not be above max_replicas");
  if (!std::isfinite(f.rps_per_replica) || f.rps_per_replica <= 0)
    return src.Error(root["rps_per_replica"], "rps_per_replica must be above 0");
  if (!std::isfinite(f.headroom) || f.headroom < 0 || f.headroom > 10)
    return src.Error(root["headroom"],
                     "headroom must be between 0 and 10 (a fraction: 0.1 is 10%)");
  if (f.interval <= 0) return src.Error(root["interval"], "interval must be above 0");
  return Status::Ok();
}

}  // namespace

StatusOr<ServingFleetSpec> ParseServingFleet(std::string_view text, const std::string& source) {
  const YamlSource src(source);
  HANGAR_ASSIGN_OR_RETURN(YAML::Node root, src.Parse(text));
  if (!root.IsMap()) return src.Error(root, "a serving fleet file is a map (docs/sim-services.md)");
  HANGAR_RETURN_IF_ERROR(src.CheckKeys(
      root, "a serving fleet",
      {"name", "gpus_per_replica", "rps_per_replica", "min_replicas", "max_replicas", "warmup",
       "priority", "surge", "interval", "scale_down_after", "headroom", "demand"}));
  ServingFleetSpec f;
  HANGAR_ASSIGN_OR_RETURN(auto name, src.OptString(root, "name"));
  if (name) f.name = *name;
  HANGAR_ASSIGN_OR_RETURN(int64_t gpus, src.Int(root, "gpus_per_replica", 1, 64));
  f.gpus_per_replica = static_cast<int>(gpus);
  if (!root["rps_per_replica"]) return src.Error(root, "rps_per_replica is missing");
  HANGAR_ASSIGN_OR_RETURN(f.rps_per_replica, Rate(src, root["rps_per_replica"], "rps_per_replica"));
  HANGAR_ASSIGN_OR_RETURN(int64_t min, src.Int(root, "min_replicas", 0, 100000));
  HANGAR_ASSIGN_OR_RETURN(int64_t max, src.Int(root, "max_replicas", 1, 100000));
  f.min_replicas = static_cast<int>(min);
  f.max_replicas = static_cast<int>(max);
  HANGAR_ASSIGN_OR_RETURN(f.warmup, DurationField(src, root, "warmup", f.warmup));
  HANGAR_ASSIGN_OR_RETURN(auto prio, src.OptInt(root, "priority", -1000000, 1000000));
  if (prio) f.priority = static_cast<int32_t>(*prio);
  HANGAR_ASSIGN_OR_RETURN(auto surge, src.OptString(root, "surge"));
  if (surge && *surge == "opportunistic") {
    f.surge = SurgeTier::kOpportunistic;
  } else if (surge && *surge != "reclaim") {
    return src.Error(root["surge"], "surge must be reclaim or opportunistic, not '" + *surge + "'");
  }
  HANGAR_ASSIGN_OR_RETURN(f.interval, DurationField(src, root, "interval", f.interval));
  HANGAR_ASSIGN_OR_RETURN(f.scale_down_after,
                          DurationField(src, root, "scale_down_after", f.scale_down_after));
  if (root["headroom"]) {
    HANGAR_ASSIGN_OR_RETURN(f.headroom, Rate(src, root["headroom"], "headroom"));
  }
  HANGAR_ASSIGN_OR_RETURN(f.demand, ParseDemand(src, root["demand"]));
  HANGAR_RETURN_IF_ERROR(CheckCounts(src, root, f));
  return f;
}

StatusOr<ServingFleetSpec> LoadServingFleet(const std::string& path) {
  std::ifstream in(path);
  if (!in) return Status::NotFound("cannot read the serving fleet file " + path);
  std::stringstream text;
  text << in.rdbuf();
  return ParseServingFleet(text.str(), path);
}

}  // namespace hangar::sim
