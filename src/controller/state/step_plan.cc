#include "controller/state/step_plan.h"

#include <algorithm>
#include <set>

#include "cluster/hostlist.h"

namespace hangar::controller {

namespace {

std::vector<std::string> Names(const std::vector<AllocationNode>& allocation) {
  std::vector<std::string> out;
  for (const auto& a : allocation) out.push_back(a.node);
  return out;
}

// The host list `list` (of option `option`) as names; empty for an empty list.
StatusOr<std::vector<std::string>> Hosts(const std::string& list, const std::string& option) {
  if (list.empty()) return std::vector<std::string>{};
  auto hosts = cluster::ExpandHostList(list);
  if (!hosts.ok()) {
    return Status::InvalidArgument(option + " " + list +
                                   " is not a host list: " + hosts.status().message());
  }
  return *hosts;
}

// The ask's node count, before the task count trims it.
StatusOr<size_t> NodeCount(const StepAsk& ask, size_t wanted, size_t candidates,
                           const std::string& alloc) {
  size_t n = candidates;
  if (ask.nodes > 0) {
    n = static_cast<size_t>(ask.nodes);
  } else if (wanted > 0) {
    n = wanted;
  } else if (ask.ntasks > 0 && ask.ntasks_per_node > 0) {
    n = static_cast<size_t>((ask.ntasks + ask.ntasks_per_node - 1) / ask.ntasks_per_node);
  } else if (ask.ntasks > 0) {
    n = std::min(static_cast<size_t>(ask.ntasks), candidates);
  }
  if (n > candidates) {
    return Status::InvalidArgument(
        "the step asks for " + std::to_string(n) + " nodes; the job's allocation (" + alloc +
        ") has " + std::to_string(candidates) + (ask.exclude.empty() ? "" : " outside --exclude") +
        ": ask for fewer with -N, or submit the job with more nodes");
  }
  if (n < wanted) {
    return Status::InvalidArgument("--nodelist names " + std::to_string(wanted) +
                                   " nodes but --nodes asks for " + std::to_string(n));
  }
  if (n == 0) {
    return Status::InvalidArgument("--exclude leaves none of the allocation's nodes (" + alloc +
                                   ") for the step");
  }
  return n;
}

// Tasks per chosen node: --ntasks-per-node fills nodes in order, else tasks spread evenly with
// the remainder on the first nodes (Slurm's block layout).
StatusOr<std::vector<int>> TasksPerNode(const StepAsk& ask, size_t nodes, int ntasks) {
  std::vector<int> per(nodes, 0);
  int left = ntasks;
  for (size_t i = 0; i < nodes; ++i) {
    per[i] = ask.ntasks_per_node > 0
                 ? std::min(ask.ntasks_per_node, left)
                 : ntasks / static_cast<int>(nodes) + (i < ntasks % nodes ? 1 : 0);
    left -= per[i];
  }
  if (left > 0) {
    return Status::InvalidArgument(
        "-n " + std::to_string(ntasks) + " tasks do not fit " + std::to_string(nodes) +
        " nodes at --ntasks-per-node=" + std::to_string(ask.ntasks_per_node));
  }
  return per;
}

// Whether `tasks` tasks of `gpus_per_task` GPUs each fit the job's GPUs on `node`.
Status CheckGpusPerTask(const AllocationNode& node, int tasks, int gpus_per_task) {
  if (node.mig) {
    return Status::InvalidArgument("the job's GPUs on " + node.node +
                                   " are MIG instances, which --gpus-per-task cannot share out "
                                   "per task; leave it out (--gpu-bind=none)");
  }
  const size_t need = static_cast<size_t>(tasks) * static_cast<size_t>(gpus_per_task);
  if (need <= node.gpus.size()) return Status::Ok();
  return Status::InvalidArgument(
      std::to_string(tasks) + " task(s) of --gpus-per-task=" + std::to_string(gpus_per_task) +
      " need " + std::to_string(need) + " GPUs on " + node.node + "; the job has " +
      std::to_string(node.gpus.size()) +
      " there: run fewer tasks per node, ask fewer GPUs per task, or --gpu-bind=none to let "
      "every task see them all");
}

}  // namespace

std::string AllocationHostList(const std::vector<AllocationNode>& allocation) {
  std::vector<std::string> names = Names(allocation);
  std::vector<std::string> distinct;
  for (const auto& n : names) {
    if (std::find(distinct.begin(), distinct.end(), n) == distinct.end()) distinct.push_back(n);
  }
  return cluster::CompressHostList(distinct);
}

StatusOr<StepLayout> PlanStep(const std::vector<AllocationNode>& allocation, const StepAsk& ask) {
  const std::string alloc = AllocationHostList(allocation);
  HANGAR_ASSIGN_OR_RETURN(std::vector<std::string> excluded, Hosts(ask.exclude, "--exclude"));
  HANGAR_ASSIGN_OR_RETURN(std::vector<std::string> wanted, Hosts(ask.nodelist, "--nodelist"));
  const std::set<std::string> out(excluded.begin(), excluded.end());
  std::vector<size_t> chosen, candidates;
  for (size_t i = 0; i < allocation.size(); ++i) {
    if (!out.count(allocation[i].node)) candidates.push_back(i);
  }
  for (const std::string& w : wanted) {
    if (out.count(w)) {
      return Status::InvalidArgument("node " + w + " is both in --nodelist and in --exclude");
    }
    auto it = std::find_if(candidates.begin(), candidates.end(), [&](size_t i) {
      return allocation[i].node == w && std::find(chosen.begin(), chosen.end(), i) == chosen.end();
    });
    if (it == candidates.end()) {
      return Status::InvalidArgument("--nodelist names " + w +
                                     ", which is not in the job's allocation (" + alloc +
                                     "); a step runs only on its job's nodes");
    }
    chosen.push_back(*it);
  }
  HANGAR_ASSIGN_OR_RETURN(size_t n, NodeCount(ask, wanted.size(), candidates.size(), alloc));
  for (size_t i : candidates) {
    if (chosen.size() >= n) break;
    if (std::find(chosen.begin(), chosen.end(), i) == chosen.end()) chosen.push_back(i);
  }
  const int per_default =
      std::max(1, ask.ntasks_per_node > 0 ? ask.ntasks_per_node : ask.default_ntasks_per_node);
  const int ntasks = ask.ntasks > 0 ? ask.ntasks : static_cast<int>(n) * per_default;
  if (static_cast<size_t>(ntasks) < n) {
    if (ask.nodes > 0 || !wanted.empty()) {
      return Status::InvalidArgument("-n " + std::to_string(ntasks) +
                                     " is fewer tasks than the step's " + std::to_string(n) +
                                     " nodes; give at least one task per node");
    }
    chosen.resize(static_cast<size_t>(ntasks));
    n = chosen.size();
  }
  HANGAR_ASSIGN_OR_RETURN(std::vector<int> per, TasksPerNode(ask, n, ntasks));
  for (size_t k = 0; k < n && ask.gpus_per_task > 0; ++k) {
    HANGAR_RETURN_IF_ERROR(CheckGpusPerTask(allocation[chosen[k]], per[k], ask.gpus_per_task));
  }
  StepLayout layout;
  int procid = 0;
  for (size_t k = 0; k < n; ++k) {
    if (per[k] == 0) continue;  // --ntasks-per-node filled the earlier nodes
    const int nodeid = static_cast<int>(layout.nodes.size());
    layout.nodes.push_back(chosen[k]);
    for (int l = 0; l < per[k]; ++l) layout.tasks.push_back({procid++, l, nodeid, chosen[k]});
  }
  return layout;
}

namespace {

// Slurm's SLURM_TASKS_PER_NODE: counts in node order, runs folded ("2(x3),1").
std::string TasksPerNodeText(const StepLayout& layout) {
  std::vector<int> counts(layout.nodes.size(), 0);
  for (const auto& t : layout.tasks) ++counts[static_cast<size_t>(t.nodeid)];
  std::string out;
  for (size_t i = 0; i < counts.size();) {
    size_t j = i;
    while (j < counts.size() && counts[j] == counts[i]) ++j;
    out += (out.empty() ? "" : ",") + std::to_string(counts[i]) +
           (j - i > 1 ? "(x" + std::to_string(j - i) + ")" : "");
    i = j;
  }
  return out;
}

}  // namespace

std::vector<std::map<std::string, std::string>> StepTaskEnvironments(const StepEnvInputs& in) {
  std::vector<std::string> step_nodes;
  for (size_t i : in.layout.nodes) step_nodes.push_back(in.allocation[i].node);
  std::vector<std::string> distinct;
  for (const auto& n : step_nodes) {
    if (std::find(distinct.begin(), distinct.end(), n) == distinct.end()) distinct.push_back(n);
  }
  const std::string job_nodes = AllocationHostList(in.allocation);
  const std::string step_list = cluster::CompressHostList(distinct);
  const std::string ntasks = std::to_string(in.layout.tasks.size());
  const std::string nnodes = std::to_string(in.layout.nodes.size());
  const std::string per_node = TasksPerNodeText(in.layout);
  std::vector<std::map<std::string, std::string>> out;
  for (const StepTaskPlace& t : in.layout.tasks) {
    std::map<std::string, std::string> env = {
        {"SLURM_JOB_ID", std::to_string(in.job_id)},
        {"SLURM_JOBID", std::to_string(in.job_id)},
        {"SLURM_STEP_ID", std::to_string(in.step_id)},
        {"SLURM_STEPID", std::to_string(in.step_id)},
        {"SLURM_PROCID", std::to_string(t.procid)},
        {"SLURM_LOCALID", std::to_string(t.localid)},
        {"SLURM_NODEID", std::to_string(t.nodeid)},
        {"SLURM_STEP_NODELIST", step_list},
        {"SLURM_STEP_NUM_NODES", nnodes},
        {"SLURM_STEP_NUM_TASKS", ntasks},
        {"SLURM_STEP_TASKS_PER_NODE", per_node},
        {"SLURM_TASKS_PER_NODE", per_node},
        {"SLURM_NTASKS", ntasks},
        {"SLURM_NPROCS", ntasks},
        {"SLURM_NNODES", nnodes},
        {"SLURM_JOB_NODELIST", job_nodes},
        {"SLURM_NODELIST", job_nodes},
        {"SLURMD_NODENAME", in.allocation[t.allocation].node},
    };
    if (in.gpus_per_task > 0) {
      const auto& gpus = in.allocation[t.allocation].gpus;
      const size_t each = static_cast<size_t>(in.gpus_per_task);
      const size_t first = static_cast<size_t>(t.localid) * each;
      std::string mine;
      for (size_t g = first; g < gpus.size() && g < first + each; ++g) {
        mine += (mine.empty() ? "" : ",") + std::to_string(gpus[g]);
      }
      env["CUDA_VISIBLE_DEVICES"] = mine;
      env["SLURM_GPUS_PER_TASK"] = std::to_string(in.gpus_per_task);
    }
    out.push_back(std::move(env));
  }
  return out;
}

}  // namespace hangar::controller
