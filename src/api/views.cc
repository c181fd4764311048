#include "api/views.h"

namespace hangar::api {

nlohmann::json ToJson(const TaskView& v) {
  nlohmann::json j = {{"index", v.index},  {"group", v.group}, {"node", v.node},
                      {"gpus", v.gpus},    {"state", v.state}, {"exit_code", v.exit_code},
                      {"signal", v.signal}};
  if (!v.mig_starts.empty()) j["mig_starts"] = v.mig_starts;
  return j;
}

nlohmann::json ToJson(const JobView& v) {
  nlohmann::json tasks = nlohmann::json::array();
  for (const auto& t : v.task_views) tasks.push_back(ToJson(t));
  nlohmann::json out = {{"id", v.id},
                        {"name", v.name},
                        {"queue", v.queue},
                        {"user", v.user},
                        {"state", v.state},
                        {"tier", v.tier},
                        {"priority", v.priority},
                        {"gpus", v.gpus},
                        {"tasks", v.tasks},
                        {"submitted_ms", v.submitted},
                        {"started_ms", v.started},
                        {"ended_ms", v.ended},
                        {"attempt", v.attempt},
                        {"restarts", v.restarts},
                        {"reason", v.reason},
                        {"reason_rule", v.reason_rule},
                        {"message", v.message},
                        {"task_list", tasks},
                        {"spec", v.spec},
                        {"array_id", v.array_id},
                        {"array_index", v.array_index},
                        {"held", v.held},
                        {"staging_ms", v.staging_ms},
                        {"staging_gpu_ms", v.staging_gpu_ms}};
  if (v.interactive) out["interactive"] = true;
  if (!v.progress.is_null()) out["progress"] = v.progress;
  if (!v.account.empty()) out["account"] = v.account;
  return out;
}

nlohmann::json ToJson(const NodeView& v) {
  return {{"name", v.name},
          {"state", v.state},
          {"reason", v.reason},
          {"model", v.model},
          {"leaf", v.leaf},
          {"spine", v.spine},
          {"gpus", v.gpus},
          {"gpus_free", v.gpus_free},
          {"milli_cpu", v.milli_cpu},
          {"milli_cpu_free", v.milli_cpu_free},
          {"memory_mib", v.memory_mib},
          {"memory_mib_free", v.memory_mib_free},
          {"connected", v.connected},
          {"last_heartbeat_ms", v.last_heartbeat},
          {"address", v.address},
          {"conditions", v.conditions},
          {"jobs", v.jobs},
          {"artifact_cache",
           {{"objects", v.artifacts},
            {"used_bytes", v.artifact_bytes},
            {"budget_bytes", v.artifact_budget},
            {"data_url", v.data_url}}}};
}

StatusOr<JobView> JobViewFromJson(const nlohmann::json& j) {
  try {
    JobView v;
    v.id = j.at("id").get<uint64_t>();
    v.name = j.value("name", "");
    v.queue = j.value("queue", "");
    v.user = j.value("user", "");
    v.state = j.value("state", "");
    v.tier = j.value("tier", "");
    v.priority = j.value("priority", 0);
    v.gpus = j.value("gpus", 0.0);
    v.tasks = j.value("tasks", 0);
    v.submitted = j.value("submitted_ms", int64_t{0});
    v.started = j.value("started_ms", int64_t{0});
    v.ended = j.value("ended_ms", int64_t{0});
    v.attempt = j.value("attempt", 0u);
    v.restarts = j.value("restarts", 0u);
    v.reason = j.value("reason", "");
    v.reason_rule = j.value("reason_rule", "");
    v.message = j.value("message", "");
    v.array_id = j.value("array_id", uint64_t{0});
    v.array_index = j.value("array_index", int64_t{-1});
    v.held = j.value("held", false);
    v.staging_ms = j.value("staging_ms", int64_t{0});
    v.staging_gpu_ms = j.value("staging_gpu_ms", int64_t{0});
    v.interactive = j.value("interactive", false);
    if (j.contains("progress") && j["progress"].is_object()) v.progress = j["progress"];
    v.account = j.value("account", "");
    for (const auto& t : j.value("task_list", nlohmann::json::array())) {
      TaskView tv;
      tv.index = t.value("index", 0u);
      tv.group = t.value("group", "");
      tv.node = t.value("node", "");
      tv.gpus = t.value("gpus", std::vector<uint32_t>{});
      tv.mig_starts = t.value("mig_starts", std::vector<int>{});
      tv.state = t.value("state", "");
      tv.exit_code = t.value("exit_code", 0);
      tv.signal = t.value("signal", 0);
      v.task_views.push_back(std::move(tv));
    }
    if (j.contains("spec")) v.spec = j["spec"];
    return v;
  } catch (const nlohmann::json::exception& e) {
    return Status::InvalidArgument(std::string("not a job: ") + e.what());
  }
}

StatusOr<NodeView> NodeViewFromJson(const nlohmann::json& j) {
  try {
    NodeView v;
    v.name = j.at("name").get<std::string>();
    v.state = j.value("state", "");
    v.reason = j.value("reason", "");
    v.model = j.value("model", "");
    v.leaf = j.value("leaf", "");
    v.spine = j.value("spine", "");
    v.gpus = j.value("gpus", 0);
    v.gpus_free = j.value("gpus_free", 0.0);
    v.milli_cpu = j.value("milli_cpu", int64_t{0});
    v.milli_cpu_free = j.value("milli_cpu_free", int64_t{0});
    v.memory_mib = j.value("memory_mib", int64_t{0});
    v.memory_mib_free = j.value("memory_mib_free", int64_t{0});
    v.connected = j.value("connected", false);
    v.last_heartbeat = j.value("last_heartbeat_ms", int64_t{0});
    v.address = j.value("address", "");
    v.conditions = j.value("conditions", std::vector<std::string>{});
    if (auto c = j.find("artifact_cache"); c != j.end() && c->is_object()) {
      v.artifacts = c->value("objects", int64_t{0});
      v.artifact_bytes = c->value("used_bytes", int64_t{0});
      v.artifact_budget = c->value("budget_bytes", int64_t{0});
      v.data_url = c->value("data_url", "");
    }
    v.jobs = j.value("jobs", std::vector<uint64_t>{});
    return v;
  } catch (const nlohmann::json::exception& e) {
    return Status::InvalidArgument(std::string("not a node: ") + e.what());
  }
}

nlohmann::json ErrorJson(const Status& s) {
  return {{"error", {{"code", std::string(StatusCodeName(s.code()))}, {"message", s.message()}}}};
}

int HttpStatusFor(const Status& s) {
  switch (s.code()) {
    case StatusCode::kOk:
      return 200;
    case StatusCode::kInvalidArgument:
      return 400;
    case StatusCode::kNotFound:
      return 404;
    case StatusCode::kAlreadyExists:
      return 409;
    case StatusCode::kFailedPrecondition:
      return 409;
    case StatusCode::kResourceExhausted:
      return 413;
    case StatusCode::kOutOfRange:
      return 422;
    case StatusCode::kPermissionDenied:
      return 403;
    case StatusCode::kUnauthenticated:
      return 401;
    case StatusCode::kUnavailable:
      return 503;
    default:
      return 500;
  }
}

}  // namespace hangar::api
