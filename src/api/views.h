// Wire types of the REST API (docs/api.md) and their JSON codecs, shared by the controller that
// writes them and the CLI that reads them, so the two cannot disagree on a field name.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "common/status.h"
#include "common/time.h"

namespace hangar::api {

struct TaskView {
  uint32_t index = 0;
  std::string group;
  std::string node;
  std::vector<uint32_t> gpus;   // GPU indices on the node
  std::vector<int> mig_starts;  // MIG tasks: each instance's first memory slice, as gpus
  std::string state;            // pending, launched, running, exited, lost
  int exit_code = 0;
  int signal = 0;
};

struct JobView {
  uint64_t id = 0;
  std::string name;
  std::string queue;
  std::string user;
  std::string state;
  std::string tier;
  int priority = 0;
  double gpus = 0;  // GPUs in all (fractions allowed)
  int tasks = 0;
  Time submitted = 0;
  Time started = 0;  // 0: not yet
  Time ended = 0;
  uint32_t attempt = 0;
  uint32_t restarts = 0;
  std::string reason;       // why it waits (pending) or how it ended
  std::string reason_rule;  // the scheduler rule behind `reason`
  std::string message;
  uint64_t array_id = 0;       // the array it is an element of (its first element's id); 0: none
  int64_t array_index = -1;    // its HANGAR_ARRAY_INDEX
  bool held = false;           // pending, and kept from starting until released
  int64_t staging_ms = 0;      // this attempt's wait for its image on its nodes (containers)
  int64_t staging_gpu_ms = 0;  // GPU-milliseconds held meanwhile
  bool interactive = false;  // a session (`hangar run`, docs/interactive.md); in JSON only when set
  // Training progress its ranks reported (docs/progress.md): {"attempt", "hung_at_ms", "ranks":
  // [{"rank", "node", "step", "at_ms", "step_time_s", "straggler"}]}; null (and not in JSON): none.
  nlohmann::json progress;
  std::string account;  // the job's accounting label (sbatch --account); in JSON only when set
  std::vector<TaskView> task_views;
  nlohmann::json spec;  // the job spec as stored
};

struct NodeView {
  std::string name;
  std::string state;  // ready, draining, drained, lost, unknown (never connected)
  std::string reason;
  std::string model;
  std::string leaf;
  std::string spine;
  int gpus = 0;
  double gpus_free = 0;
  int64_t milli_cpu = 0;
  int64_t milli_cpu_free = 0;
  int64_t memory_mib = 0;
  int64_t memory_mib_free = 0;
  bool connected = false;
  Time last_heartbeat = 0;
  std::string address;
  std::vector<std::string> conditions;
  std::vector<uint64_t> jobs;
  // Its artifact cache (docs/data.md): objects held, bytes used and its budget (0: none), and
  // where it serves peers ("": it does not).
  int64_t artifacts = 0, artifact_bytes = 0, artifact_budget = 0;
  std::string data_url;
};

nlohmann::json ToJson(const TaskView& v);
nlohmann::json ToJson(const JobView& v);
nlohmann::json ToJson(const NodeView& v);
StatusOr<JobView> JobViewFromJson(const nlohmann::json& j);
StatusOr<NodeView> NodeViewFromJson(const nlohmann::json& j);

// {"error": {"code": "INVALID_ARGUMENT", "message": "..."}}
nlohmann::json ErrorJson(const Status& s);
// The HTTP status for a Status code (400, 404, 409, 413, 422, 403, 401, 503, 500).
int HttpStatusFor(const Status& s);

}  // namespace hangar::api
