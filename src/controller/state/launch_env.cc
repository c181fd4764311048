#include "controller/state/launch_env.h"

#include <algorithm>

#include "common/units.h"

namespace hangar::controller {

std::vector<uint32_t> GpuIndices(const cluster::Topology& t, const cluster::GangAssignment& a,
                                 const cluster::TaskPlacement& task) {
  std::vector<uint32_t> out;
  for (const auto& g : a.GrantsOf(task)) out.push_back(t.gpus()[g.gpu].index);
  return out;
}

std::vector<std::map<std::string, std::string>> TaskEnvironments(const LaunchContext& ctx) {
  const auto& tasks = ctx.assignment->tasks;
  std::vector<uint32_t> node_order;  // distinct nodes in order of first task
  for (const auto& t : tasks) {
    if (std::find(node_order.begin(), node_order.end(), t.node) == node_order.end()) node_order.push_back(t.node);
  }
  std::vector<std::map<std::string, std::string>> out;
  for (size_t i = 0; i < tasks.size(); ++i) {
    const auto& task = tasks[i];
    std::map<std::string, std::string> env;
    for (const auto& [k, v] : ctx.spec->tasks[task.group].env) env[k] = v;
    int local_rank = 0, local_world = 0;
    for (size_t k = 0; k < tasks.size(); ++k) {
      if (tasks[k].node != task.node) continue;
      if (k < i) ++local_rank;
      ++local_world;
    }
    std::string gpus;
    for (uint32_t g : GpuIndices(*ctx.topology, *ctx.assignment, task)) gpus += (gpus.empty() ? "" : ",") + std::to_string(g);
    env["CUDA_VISIBLE_DEVICES"] = gpus;
    env["HANGAR_JOB_ID"] = std::to_string(ctx.job_id);
    env["HANGAR_JOB_NAME"] = ctx.spec->name;
    env["HANGAR_TASK_INDEX"] = std::to_string(i);
    env["HANGAR_TASK_GROUP"] = ctx.spec->tasks[task.group].name;
    env["HANGAR_ATTEMPT"] = std::to_string(ctx.attempt);
    env["HANGAR_RESTART_COUNT"] = std::to_string(ctx.restarts);
    env["HANGAR_CHECKPOINT_DIR"] = ctx.checkpoint_dir;
    env["HANGAR_NODE"] = ctx.topology->nodes()[task.node].name;
    if (ctx.array_id) {
      env["HANGAR_ARRAY_JOB_ID"] = std::to_string(ctx.array_id);
      env["HANGAR_ARRAY_INDEX"] = std::to_string(ctx.array_index);
    }
    const auto& gpu = ctx.spec->tasks[task.group].gpu;
    if (gpu.kind == job::GpuKind::kShared) {
      env["HANGAR_GPU_FRACTION"] = FormatMilli(gpu.milli);
      // The GPU memory granted, for the agent's MPS limit (docs/sharing.md); the agent sets the
      // compute share itself. Set after the job's own env, so a job cannot raise its limit.
      for (const auto& g : ctx.assignment->GrantsOf(task)) {
        if (g.memory_mib > 0) env["HANGAR_GPU_MEMORY_MIB"] = std::to_string(g.memory_mib);
      }
    }
    if (gpu.kind == job::GpuKind::kMig) {
      env["HANGAR_MIG_PROFILE"] = gpu.mig_profile;
      // Where the instance is: "<gpu>:<first memory slice>" (the agent checks it against the GPU).
      for (const auto& g : ctx.assignment->GrantsOf(task)) {
        if (g.mig_start >= 0) env["HANGAR_MIG_PLACEMENT"] = std::to_string(ctx.topology->gpus()[g.gpu].index) + ":" + std::to_string(g.mig_start);
      }
    }
    env["MASTER_ADDR"] = ctx.address_of(tasks[0].node);
    env["MASTER_PORT"] = std::to_string(ctx.master_port);
    env["WORLD_SIZE"] = std::to_string(tasks.size());
    env["RANK"] = std::to_string(i);
    env["NODE_RANK"] = std::to_string(std::find(node_order.begin(), node_order.end(), task.node) - node_order.begin());
    env["LOCAL_RANK"] = std::to_string(local_rank);
    env["LOCAL_WORLD_SIZE"] = std::to_string(local_world);
    env["GROUP_RANK"] = env["NODE_RANK"];
    out.push_back(std::move(env));
  }
  return out;
}

}  // namespace hangar::controller
