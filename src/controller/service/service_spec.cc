#include "controller/service/service_spec.h"

#include <regex>
#include <span>
#include <string>
#include <vector>

#include "common/yaml_util.h"

namespace hangar::controller::service {
namespace {

constexpr std::string_view kServiceKeys[] = {"replicas", "restart",     "readiness", "liveness",
                                             "update",   "drain_grace", "autoscale"};
constexpr std::string_view kAutoscaleKeys[] = {"min", "max", "in_flight_per_replica",
                                               "rps_per_replica", "scale_down_after"};
constexpr std::string_view kReadinessKeys[] = {
    "http",     "tcp",     "command",           "port",
    "interval", "timeout", "success_threshold", "failure_threshold"};
constexpr std::string_view kLivenessKeys[] = {
    "http", "tcp", "command", "port", "interval", "timeout", "failure_threshold", "initial_delay"};
constexpr std::string_view kRestartKeys[] = {"backoff", "max_backoff"};
constexpr std::string_view kUpdateKeys[] = {"max_surge", "max_unavailable", "progress_deadline"};

class BlockReader {
 public:
  explicit BlockReader(const YamlSource& src) : src_(src) {}

  Status DurationField(const YAML::Node& map, const char* key, Duration min, Duration* out) const {
    const YAML::Node v = map[key];
    if (!v) return Status::Ok();
    if (!v.IsScalar())
      return src_.Error(v, std::string(key) + " must be a duration such as 500ms, 2s or 1m");
    auto d = ParseDuration(v.Scalar());
    if (!d.ok() || *d < min) {
      return src_.Error(v, std::string(key) + " '" + v.Scalar() +
                               "' must be a duration of at least " + FormatDuration(min) +
                               ", such as 500ms, 2s or 1m");
    }
    *out = *d;
    return Status::Ok();
  }

  Status Int(const YAML::Node& map, const char* key, int64_t min, int64_t max, int* out) const {
    HANGAR_ASSIGN_OR_RETURN(auto v, src_.OptInt(map, key, min, max));
    if (v) *out = static_cast<int>(*v);
    return Status::Ok();
  }

  // `what` is "readiness" or "liveness".
  Status Probe(const YAML::Node& p, const char* what, ProbeSpec* out) const {
    const bool live = std::string_view(what) == "liveness";
    const std::span<const std::string_view> keys =
        live ? std::span<const std::string_view>(kLivenessKeys)
             : std::span<const std::string_view>(kReadinessKeys);
    HANGAR_RETURN_IF_ERROR(src_.CheckKeys(p, what, keys));
    if (!!p["http"] + !!p["tcp"] + !!p["command"] > 1) {
      return src_.Error(
          p, std::string(what) + " takes one of http: PATH, tcp: PORT or command: [...], not more");
    }
    if (p["http"]) {
      HANGAR_ASSIGN_OR_RETURN(out->path, src_.String(p, "http"));
      if (out->path.empty() || out->path.front() != '/' ||
          out->path.find_first_of(" \r\n\t") != std::string::npos) {
        return src_.Error(p["http"], std::string(what) + " http: must be a path such as /healthz");
      }
      out->kind = ProbeSpec::Kind::kHttp;
      HANGAR_RETURN_IF_ERROR(Int(p, "port", 0, 65535, &out->port));
    } else if (p["tcp"]) {
      out->kind = ProbeSpec::Kind::kTcp;
      const YAML::Node t = p["tcp"];
      if (t.IsScalar() && t.Scalar() == "HANGAR_PORT") {
        out->port = 0;
      } else {
        HANGAR_RETURN_IF_ERROR(Int(p, "tcp", 0, 65535, &out->port));
      }
    } else if (p["command"]) {
      out->kind = ProbeSpec::Kind::kCommand;
      HANGAR_RETURN_IF_ERROR(Command(p["command"], what, &out->command));
    } else {
      return src_.Error(p, std::string(what) +
                               " needs http: PATH (a GET that answers 2xx), tcp: PORT (HANGAR_PORT "
                               "for the replica's own) or command: [PROGRAM, ARGS...] (run in the "
                               "replica's task; exit 0 passes)");
    }
    HANGAR_RETURN_IF_ERROR(DurationField(p, "interval", 100, &out->interval));
    HANGAR_RETURN_IF_ERROR(DurationField(p, "timeout", 50, &out->timeout));
    HANGAR_RETURN_IF_ERROR(DurationField(p, "initial_delay", 0, &out->initial_delay));
    HANGAR_RETURN_IF_ERROR(Int(p, "success_threshold", 1, 100, &out->success_threshold));
    return Int(p, "failure_threshold", 1, 100, &out->failure_threshold);
  }

  Status Command(const YAML::Node& c, const char* what, std::vector<std::string>* out) const {
    const std::string form = std::string(what) +
                             " command: must be a list of 1-64 strings, the program first, such "
                             "as [curl, -sf, localhost:8000/health]";
    if (!c.IsSequence() || c.size() == 0 || c.size() > 64) return src_.Error(c, form);
    size_t bytes = 0;
    for (const YAML::Node& a : c) {
      if (!a.IsScalar()) return src_.Error(a, form);
      bytes += a.Scalar().size();
      out->push_back(a.Scalar());
    }
    if (out->front().empty() || bytes > 4096) return src_.Error(c, form);
    return Status::Ok();
  }

  Status Autoscale(const YAML::Node& b, const YAML::Node& a, ServiceOptions* o) const {
    HANGAR_RETURN_IF_ERROR(src_.CheckKeys(a, "autoscale", kAutoscaleKeys));
    if (b["replicas"]) {
      return src_.Error(b["replicas"],
                        "give either replicas: N or autoscale: {min, max}, not both");
    }
    AutoscaleSpec& s = o->autoscale;
    s.on = true;
    HANGAR_RETURN_IF_ERROR(Int(a, "min", 0, kMaxReplicas, &s.min));
    HANGAR_RETURN_IF_ERROR(Int(a, "max", 1, kMaxReplicas, &s.max));
    if (!a["min"] || !a["max"] || s.min > s.max) {
      return src_.Error(a,
                        "autoscale needs min and max, min at most max, such as {min: 1, max: 4}");
    }
    HANGAR_RETURN_IF_ERROR(Int(a, "rps_per_replica", 1, 1'000'000, &s.rps_per_replica));
    // A target given alone is the only one; with neither, one request in flight per replica.
    if (a["rps_per_replica"] && !a["in_flight_per_replica"]) s.in_flight_per_replica = 0;
    HANGAR_RETURN_IF_ERROR(Int(a, "in_flight_per_replica", 1, 10'000, &s.in_flight_per_replica));
    HANGAR_RETURN_IF_ERROR(DurationField(a, "scale_down_after", 0, &s.scale_down_after));
    o->replicas = s.min;
    return Status::Ok();
  }

  Status Block(const YAML::Node& b, ServiceOptions* o) const {
    HANGAR_RETURN_IF_ERROR(src_.CheckKeys(b, "service", kServiceKeys));
    HANGAR_RETURN_IF_ERROR(Int(b, "replicas", 0, kMaxReplicas, &o->replicas));
    if (const YAML::Node r = b["restart"]) {
      HANGAR_RETURN_IF_ERROR(src_.CheckKeys(r, "restart", kRestartKeys));
      HANGAR_RETURN_IF_ERROR(DurationField(r, "backoff", 0, &o->restart.backoff));
      HANGAR_RETURN_IF_ERROR(
          DurationField(r, "max_backoff", o->restart.backoff, &o->restart.max_backoff));
      o->restart.max_backoff = std::max(o->restart.max_backoff, o->restart.backoff);
    }
    if (const YAML::Node p = b["readiness"])
      HANGAR_RETURN_IF_ERROR(Probe(p, "readiness", &o->readiness));
    if (const YAML::Node p = b["liveness"]) {
      o->liveness.emplace();
      HANGAR_RETURN_IF_ERROR(Probe(p, "liveness", &*o->liveness));
    }
    if (const YAML::Node a = b["autoscale"]) HANGAR_RETURN_IF_ERROR(Autoscale(b, a, o));
    if (const YAML::Node u = b["update"]) {
      HANGAR_RETURN_IF_ERROR(src_.CheckKeys(u, "update", kUpdateKeys));
      HANGAR_RETURN_IF_ERROR(Int(u, "max_surge", 0, kMaxSurge, &o->update.max_surge));
      HANGAR_RETURN_IF_ERROR(
          Int(u, "max_unavailable", 0, kMaxReplicas, &o->update.max_unavailable));
      HANGAR_RETURN_IF_ERROR(
          DurationField(u, "progress_deadline", kSecond, &o->update.progress_deadline));
      if (o->update.max_surge == 0 && o->update.max_unavailable == 0) {
        return src_.Error(
            u,
            "update: max_surge and max_unavailable cannot both be 0 (a rollout could replace no "
            "replica); give max_surge: 1");
      }
    }
    return DurationField(b, "drain_grace", 0, &o->drain_grace);
  }

 private:
  const YamlSource& src_;
};

// The job part of the text, with the service block's lines blanked so that the job parser's errors
// keep the file's line numbers. Flow-style documents (JSON) lose the block through nlohmann.
StatusOr<std::string> JobPart(std::string_view text, const YAML::Node& root) {
  if (root.Style() == YAML::EmitterStyle::Flow) {
    auto j = nlohmann::json::parse(text, nullptr, false);
    if (j.is_discarded() || !j.is_object()) {
      return Status::InvalidArgument("a flow-style service file must be a JSON object");
    }
    j.erase("service");
    return j.dump();
  }
  int from = -1, to = -1;
  for (auto it = root.begin(); it != root.end(); ++it) {
    const int line = it->first.Mark().line;
    if (it->first.Scalar() == "service") from = line;
  }
  for (auto it = root.begin(); it != root.end(); ++it) {
    const int line = it->first.Mark().line;
    if (line > from && (to < 0 || line < to)) to = line;
  }
  std::string out;
  int line = 0;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string_view::npos) end = text.size();
    const bool blank = line >= from && (to < 0 || line < to);
    if (!blank) out.append(text.substr(pos, end - pos));
    out += '\n';
    pos = end + 1;
    ++line;
  }
  return out;
}

}  // namespace

Status CheckServiceName(const std::string& name) {
  static const std::regex re(R"(^[a-z][a-z0-9-]{0,39}$)");
  if (std::regex_match(name, re)) return Status::Ok();
  return Status::InvalidArgument(
      "service name '" + name.substr(0, 60) +
      "' must be 1-40 lowercase letters, digits or '-', starting with a letter");
}

StatusOr<ServiceSpec> ParseServiceSpec(std::string_view text, const std::string& source_name) {
  YamlSource src(source_name);
  HANGAR_ASSIGN_OR_RETURN(YAML::Node root, src.Parse(text));
  if (!root.IsMap())
    return Status::InvalidArgument(source_name +
                                   ": a service file is a map with name:, service: and tasks:");
  const YAML::Node block = root["service"];
  if (!block || !block.IsMap()) {
    return Status::InvalidArgument(
        source_name +
        ": no service: block; a service file is a job file with service: "
        "{replicas: 3, readiness: {http: /healthz}} (docs/services.md)");
  }
  ServiceSpec s;
  HANGAR_RETURN_IF_ERROR(BlockReader(src).Block(block, &s.options));
  HANGAR_ASSIGN_OR_RETURN(std::string job_text, JobPart(text, root));
  HANGAR_ASSIGN_OR_RETURN(s.replica, job::ParseJobSpec(job_text, source_name));
  s.name = s.replica.name;
  HANGAR_RETURN_IF_ERROR(CheckServiceName(s.name));
  if (s.replica.tasks.size() != 1) {
    return Status::InvalidArgument(
        source_name + ": a service has one task group (the template of a replica); it has " +
        std::to_string(s.replica.tasks.size()));
  }
  if (s.replica.tasks[0].replicas != 1) {
    return Status::InvalidArgument(
        source_name +
        ": the task group's replicas must be 1 (one task per replica); give "
        "the count as service: {replicas: " +
        std::to_string(s.replica.tasks[0].replicas) + "}");
  }
  if (!s.replica.array.empty() || !s.replica.after.empty()) {
    return Status::InvalidArgument(
        source_name + ": a service takes no array: or after: (its replicas are kept running)");
  }
  return s;
}

namespace {

nlohmann::json ProbeToJson(const ProbeSpec& p, bool liveness) {
  nlohmann::json out = {{"interval", FormatDuration(p.interval)},
                        {"timeout", FormatDuration(p.timeout)},
                        {"failure_threshold", p.failure_threshold}};
  if (liveness) {
    out["initial_delay"] = FormatDuration(p.initial_delay);
  } else {
    out["success_threshold"] = p.success_threshold;
  }
  switch (p.kind) {
    case ProbeSpec::Kind::kHttp:
      out["http"] = p.path;
      if (p.port) out["port"] = p.port;
      break;
    case ProbeSpec::Kind::kTcp:
      out["tcp"] = p.port;
      break;
    case ProbeSpec::Kind::kCommand:
      out["command"] = p.command;
      break;
  }
  return out;
}

}  // namespace

nlohmann::json ServiceOptionsToJson(const ServiceOptions& o) {
  nlohmann::json out = {{"restart",
                         {{"backoff", FormatDuration(o.restart.backoff)},
                          {"max_backoff", FormatDuration(o.restart.max_backoff)}}},
                        {"readiness", ProbeToJson(o.readiness, false)},
                        {"update",
                         {{"max_surge", o.update.max_surge},
                          {"max_unavailable", o.update.max_unavailable},
                          {"progress_deadline", FormatDuration(o.update.progress_deadline)}}},
                        {"drain_grace", FormatDuration(o.drain_grace)}};
  if (o.liveness) out["liveness"] = ProbeToJson(*o.liveness, true);
  if (o.autoscale.on) {
    nlohmann::json a = {{"min", o.autoscale.min},
                        {"max", o.autoscale.max},
                        {"scale_down_after", FormatDuration(o.autoscale.scale_down_after)}};
    if (o.autoscale.in_flight_per_replica)
      a["in_flight_per_replica"] = o.autoscale.in_flight_per_replica;
    if (o.autoscale.rps_per_replica) a["rps_per_replica"] = o.autoscale.rps_per_replica;
    out["autoscale"] = std::move(a);
  } else {
    out["replicas"] = o.replicas;
  }
  return out;
}

StatusOr<ServiceOptions> ServiceOptionsFromJson(const nlohmann::json& j) {
  // The stored form is the YAML block's form: read it with the same reader.
  YamlSource src("the stored service");
  HANGAR_ASSIGN_OR_RETURN(YAML::Node node, src.Parse(j.dump()));
  ServiceOptions o;
  HANGAR_RETURN_IF_ERROR(BlockReader(src).Block(node, &o));
  return o;
}

}  // namespace hangar::controller::service
