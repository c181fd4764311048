// AttemptUsage: one ended attempt of a job, for accounting (`hangar usage`, `hangar history`)
// and for what the scheduler's owner side learns (job_learning.h); kept in the store ("usage").
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "common/time.h"
#include "sched/snapshot.h"

namespace hangar::controller {

struct AttemptUsage {
  sched::JobId job = 0;
  uint32_t attempt = 0;
  std::string user, queue, tier;
  Time start = 0, end = 0;
  int64_t milli_gpu = 0;
  int64_t idle_gpu_ms = 0;
  int64_t lost_gpu_ms = 0;  // work since its last checkpoint, thrown away by a preemption or drain
  int64_t staging_gpu_ms = 0;           // GPUs held while the gang's image was pulled
  std::string how;                      // succeeded, failed, cancelled, requeued
  std::vector<std::string> task_nodes;  // where each task ran, by index (for its logs)
  nlohmann::json ToJson() const;
  static AttemptUsage FromJson(const nlohmann::json& j);
};

}  // namespace hangar::controller
