// Enforced GPU fractions (docs/sharing.md): a fractional task runs as a client of its
// GPU's MPS control daemon, with its memory and compute share as MPS limits.
#include <signal.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <fstream>

#include "agent/agent.h"

namespace hangar::agent {

namespace {

// Sets `name` in `env`, replacing what the controller put there.
void SetEnv(std::vector<std::pair<std::string, std::string>>* env, const std::string& name,
            const std::string& value) {
  for (auto& [k, v] : *env) {
    if (k == name) {
      v = value;
      return;
    }
  }
  env->emplace_back(name, value);
}

// GPU memory a fake task reports: the second number of its HANGAR_FAKE_GPU_UTIL_FILE
// ("<util %> <memory MiB>"); -1 when it reports none.
int64_t ReportedMemoryMiB(const std::string& util_file) {
  std::ifstream in(util_file);
  int64_t util = 0, mib = -1;
  if (!(in >> util >> mib)) return -1;
  return mib;
}

}  // namespace

Status Agent::PrepareMps(const pb::Launch& l, TaskLaunch* launch, TaskRecord* r) {
  if (!mps_ || l.has_container()) return Status::Ok();  // containers: not under MPS (yet)
  const std::map<std::string, std::string> env(l.env().begin(), l.env().end());
  const uint32_t gpu = l.gpu_indices_size() == 1 ? l.gpu_indices(0) : 0;
  const pb::GpuInfo* info = facts_.GpuWithIndex(gpu);
  StatusOr<std::optional<MpsShare>> share =
      FractionalShare(env, static_cast<size_t>(l.gpu_indices_size()), l.mig_instances_size() > 0,
                      info ? static_cast<int64_t>(info->memory_mib()) : 0);
  if (!share.ok())
    return Status(share.status().code(), "node " + options_.node + ": " + share.status().message());
  if (!*share) return Status::Ok();
  if (!info)
    return Status::NotFound("node " + options_.node + " has no GPU " + std::to_string(gpu));
  StatusOr<MpsDaemon> d = mps_->Acquire(l.task_id(), gpu, info->uuid(), r->uid);
  if (!d.ok())
    return Status(d.status().code(), "node " + options_.node + ": " + d.status().message());
  for (const auto& [k, v] : MpsClientEnv(**share, *d)) SetEnv(&launch->env, k, v);
  r->mps = d->key;
  r->mps_memory_mib = (*share)->memory_mib;
  spdlog::info("agent {}: task {} runs under MPS on GPU {}: {} MiB, {}% of its threads",
               options_.node, l.task_id(), gpu, (*share)->memory_mib,
               ActiveThreadPercentage((*share)->milli));
  return Status::Ok();
}

void Agent::ReleaseMps(const TaskRecord& r) {
  if (mps_ && !r.mps.empty()) mps_->Release(r.task_id);
}

void Agent::InitMps() {
  if (!options_.mps.enabled) return;
  mps_ = std::make_unique<MpsDaemons>(options_.mps);
  std::vector<TaskRecord> clients;
  {
    MutexLock l(tasks_.mu());
    for (const auto& [id, r] : tasks_.records()) {
      if (!r.ended && !r.mps.empty() && r.gpus.size() == 1) clients.push_back(r);
    }
  }
  for (const TaskRecord& r : clients) {
    const pb::GpuInfo* gpu = facts_.GpuWithIndex(r.gpus[0]);
    const std::string uuid = gpu ? gpu->uuid() : "";
    auto d = mps_->Acquire(r.task_id, r.gpus[0], uuid, r.uid);
    if (!d.ok())
      spdlog::error("agent {}: adopted task {}: {}", options_.node, r.task_id,
                    d.status().message());
  }
  mps_->StopUnused();  // daemons no task holds any more (the agent was down when they ended)
}

void Agent::CheckMpsLimits() {
  if (!mps_ || !mps_->options().fake) return;
  std::vector<std::pair<std::string, std::pair<std::string, std::string>>>
      over;  // task, (daemon, why)
  {
    MutexLock l(tasks_.mu());
    for (auto& [id, r] : tasks_.records()) {
      if (r.ended || r.mps.empty() || r.mps_memory_mib <= 0 || !r.message.empty()) continue;
      const int64_t used = ReportedMemoryMiB(TaskDir(id) + "/gpu_util");
      if (used <= r.mps_memory_mib) continue;
      r.message =
          "GPU memory over its MPS limit: it used " + std::to_string(used) + " MiB of GPU " +
          std::to_string(r.gpus.empty() ? 0 : r.gpus[0]) +
          ", its CUDA_MPS_PINNED_DEVICE_MEM_LIMIT is " + std::to_string(r.mps_memory_mib) +
          " MiB (on a GPU the allocation fails with out of memory); ask for more gpu_memory";
      over.push_back({id, {r.mps, r.message}});
    }
    if (!over.empty()) tasks_.SaveAll();
  }
  for (const auto& [id, why] : over) {
    {
      std::ofstream log(mps_->options().root + "/" + why.first + "/log/server.log", std::ios::app);
      log << "client of task " << id
          << ": allocation refused, over its pinned device memory limit; task ended\n";
      // Where its user looks (`hangar logs --stderr`), as a CUDA program prints its out-of-memory
      // error.
      std::ofstream err(TaskDir(id) + "/stderr.log", std::ios::app);
      err << "hangar agent: " << why.second << "\n";
    }
    spdlog::warn("agent {}: task {}: over its MPS memory limit; ending it", options_.node, id);
    (void)runner_.Signal(id, SIGKILL);
  }
}

}  // namespace hangar::agent
