#include "controller/state/launch_env.h"

#include <algorithm>

#include "cluster/hostlist.h"
#include "common/units.h"

namespace hangar::controller {

std::vector<uint32_t> GpuIndices(const cluster::Topology& t, const cluster::GangAssignment& a,
                                 const cluster::TaskPlacement& task) {
  std::vector<uint32_t> out;
  for (const auto& g : a.GrantsOf(task)) out.push_back(t.gpus()[g.gpu].index);
  return out;
}

namespace {

// torchrun reads its flags from PET_* variables, not from MASTER_ADDR/NODE_RANK: without these,
// `torchrun train.py` on every node of a gang would think it is node 0 of 1. Each task is one
// torchrun agent (its "node" in torchrun's words), so a gang of N tasks is N torchrun nodes and
// a task's rank among them is its task index; the workers it starts are the task's whole GPUs.
// The job's own env wins: a user who sets PET_NPROC_PER_NODE (or passes flags) means it.
void SetTorchrunDefaults(const LaunchContext& ctx, size_t task_index,
                         std::map<std::string, std::string>* env) {
  const auto& tasks = ctx.assignment->tasks;
  const auto& group = ctx.spec->tasks[tasks[task_index].group];
  auto set = [&](const std::string& k, const std::string& v) {
    for (const auto& [name, value] : group.env) {
      if (name == k) return;
    }
    (*env)[k] = v;
  };
  set("PET_NNODES", std::to_string(tasks.size()));
  set("PET_NODE_RANK", std::to_string(task_index));
  set("PET_MASTER_ADDR", (*env)["MASTER_ADDR"]);
  set("PET_MASTER_PORT", (*env)["MASTER_PORT"]);
  if (group.gpu.kind == job::GpuKind::kWhole && group.gpu.count > 0) {
    set("PET_NPROC_PER_NODE", std::to_string(group.gpu.count));
  }
}

}  // namespace

std::vector<std::map<std::string, std::string>> TaskEnvironments(const LaunchContext& ctx) {
  const auto& tasks = ctx.assignment->tasks;
  std::vector<uint32_t> node_order;  // distinct nodes in order of first task
  for (const auto& t : tasks) {
    if (std::find(node_order.begin(), node_order.end(), t.node) == node_order.end())
      node_order.push_back(t.node);
  }
  // The job's nodes in Slurm's host list form: what a batch script's SLURM_JOB_NODELIST holds.
  std::vector<std::string> node_names;
  for (uint32_t n : node_order) node_names.push_back(ctx.topology->nodes()[n].name);
  const std::string job_nodes = cluster::CompressHostList(node_names);
  // With several task groups, each group's nodes too (HANGAR_GROUP_NODES_<group's place>): a
  // heterogeneous batch job's SLURM_JOB_NODELIST_HET_GROUP_<n>.
  std::map<std::string, std::string> group_nodes;
  if (ctx.spec->tasks.size() > 1) {
    for (size_t g = 0; g < ctx.spec->tasks.size(); ++g) {
      std::vector<std::string> names;
      for (const auto& t : tasks) {
        const std::string& n = ctx.topology->nodes()[t.node].name;
        if (t.group == g && std::find(names.begin(), names.end(), n) == names.end())
          names.push_back(n);
      }
      group_nodes["HANGAR_GROUP_NODES_" + std::to_string(g)] = cluster::CompressHostList(names);
    }
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
    for (uint32_t g : GpuIndices(*ctx.topology, *ctx.assignment, task))
      gpus += (gpus.empty() ? "" : ",") + std::to_string(g);
    env["CUDA_VISIBLE_DEVICES"] = gpus;
    env["HANGAR_JOB_ID"] = std::to_string(ctx.job_id);
    env["HANGAR_JOB_NAME"] = ctx.spec->name;
    env["HANGAR_TASK_INDEX"] = std::to_string(i);
    env["HANGAR_TASK_GROUP"] = ctx.spec->tasks[task.group].name;
    env["HANGAR_ATTEMPT"] = std::to_string(ctx.attempt);
    env["HANGAR_RESTART_COUNT"] = std::to_string(ctx.restarts);
    env["HANGAR_CHECKPOINT_DIR"] = ctx.checkpoint_dir;
    env["HANGAR_NODE"] = ctx.topology->nodes()[task.node].name;
    env["HANGAR_JOB_NODES"] = job_nodes;
    for (const auto& [k, v] : group_nodes) env[k] = v;
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
        if (g.mig_start >= 0)
          env["HANGAR_MIG_PLACEMENT"] =
              std::to_string(ctx.topology->gpus()[g.gpu].index) + ":" + std::to_string(g.mig_start);
      }
    }
    // The data network (docs/networks.md): collectives and rendezvous stay off the
    // management network. Set after the job's own env, as the node's wiring is not the job's to
    // choose. A task uses its GPUs' rails; one without GPUs every rail of its node.
    const cluster::NodeNetworks& nets = ctx.topology->nodes()[task.node].networks;
    if (!nets.data_interfaces.empty()) {
      std::vector<int> rails;
      for (const auto& g : ctx.assignment->GrantsOf(task)) {
        const int rail = ctx.topology->gpus()[g.gpu].rail;
        if (rail >= 0 && static_cast<size_t>(rail) < nets.data_interfaces.size() &&
            std::find(rails.begin(), rails.end(), rail) == rails.end()) {
          rails.push_back(rail);
        }
      }
      // The names of one kind on the task's rails; where those rails have none of that kind,
      // every rail's (a socket must still leave by a data interface).
      auto names = [&](std::string cluster::DataInterface::*field) {
        std::string out;
        for (int pass = 0; pass < 2 && out.empty(); ++pass) {
          for (size_t r = 0; r < nets.data_interfaces.size(); ++r) {
            if (pass == 0 &&
                std::find(rails.begin(), rails.end(), static_cast<int>(r)) == rails.end())
              continue;
            const std::string& name = nets.data_interfaces[r].*field;
            if (!name.empty()) out += (out.empty() ? "" : ",") + name;
          }
        }
        return out;
      };
      const std::string netdevs = names(&cluster::DataInterface::netdev),
                        hcas = names(&cluster::DataInterface::hca);
      if (!netdevs.empty()) {
        env["NCCL_SOCKET_IFNAME"] = "=" + netdevs;  // '=': these names exactly, not as prefixes
        env["GLOO_SOCKET_IFNAME"] = netdevs;
      }
      if (!hcas.empty()) env["NCCL_IB_HCA"] = "=" + hcas;
    }
    const cluster::NodeNetworks& first = ctx.topology->nodes()[tasks[0].node].networks;
    env["MASTER_ADDR"] =
        first.data_address.empty() ? ctx.address_of(tasks[0].node) : first.data_address;
    env["MASTER_PORT"] = std::to_string(ctx.master_port);
    env["WORLD_SIZE"] = std::to_string(tasks.size());
    env["RANK"] = std::to_string(i);
    env["NODE_RANK"] = std::to_string(std::find(node_order.begin(), node_order.end(), task.node) -
                                      node_order.begin());
    env["LOCAL_RANK"] = std::to_string(local_rank);
    env["LOCAL_WORLD_SIZE"] = std::to_string(local_world);
    env["GROUP_RANK"] = env["NODE_RANK"];
    SetTorchrunDefaults(ctx, i, &env);
    out.push_back(std::move(env));
  }
  return out;
}

}  // namespace hangar::controller
