#include "controller/state/attempt_usage.h"

namespace hangar::controller {

nlohmann::json AttemptUsage::ToJson() const {
  return {{"job", job},
          {"attempt", attempt},
          {"user", user},
          {"queue", queue},
          {"tier", tier},
          {"start", start},
          {"end", end},
          {"milli_gpu", milli_gpu},
          {"idle_gpu_ms", idle_gpu_ms},
          {"lost_gpu_ms", lost_gpu_ms},
          {"how", how},
          {"nodes", task_nodes},
          {"staging_gpu_ms", staging_gpu_ms}};
}

AttemptUsage AttemptUsage::FromJson(const nlohmann::json& j) {
  AttemptUsage u;
  u.job = j.value("job", uint64_t{0});
  u.attempt = j.value("attempt", 0u);
  u.user = j.value("user", "");
  u.queue = j.value("queue", "");
  u.tier = j.value("tier", "");
  u.start = j.value("start", Time{0});
  u.end = j.value("end", Time{0});
  u.milli_gpu = j.value("milli_gpu", int64_t{0});
  u.idle_gpu_ms = j.value("idle_gpu_ms", int64_t{0});
  u.lost_gpu_ms = j.value("lost_gpu_ms", int64_t{0});
  u.staging_gpu_ms = j.value("staging_gpu_ms", int64_t{0});
  u.how = j.value("how", "");
  u.task_nodes = j.value("nodes", std::vector<std::string>{});
  return u;
}

}  // namespace hangar::controller
