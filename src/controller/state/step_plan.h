// Where a step's tasks run inside an allocation, and what each task is told: srun's node and
// task options (-N, -n, --ntasks-per-node, -w, -x) resolved against the job's nodes as Slurm
// resolves them, and Slurm's per-task variables. Pure: no clock, no state, deterministic.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "common/status.h"

namespace hangar::controller {

// One Slurm node of the allocation: a task of the job (in task order), and the node it runs on.
struct AllocationNode {
  std::string node;     // the Hangar node's name, as SLURM_JOB_NODELIST names it
  std::string task_id;  // the job's task there: a step's task runs beside it
  // The job's GPUs on that node (their indices there, as the task's CUDA_VISIBLE_DEVICES lists
  // them), and whether they are MIG instances (which a step cannot share out per task).
  std::vector<uint32_t> gpus;
  bool mig = false;
  uint32_t task_index = 0;  // the job's task (HANGAR_TASK_INDEX)
  // Its task group's place in the job spec: a heterogeneous job's component (srun --het-group).
  int group = 0;
};

// What srun asked; 0 / empty: not given.
struct StepAsk {
  int nodes = 0;
  int ntasks = 0;
  int ntasks_per_node = 0;
  int default_ntasks_per_node = 1;  // the job's, used when srun gives no task count
  std::string nodelist;             // -w: a host list
  std::string exclude;              // -x: a host list
  // GPUs each task gets of its node's (srun --gpus-per-task, or the job's SLURM_GPUS_PER_TASK, as
  // Slurm binds them since 21.08); 0: every task sees all of its node's GPUs of the job.
  int gpus_per_task = 0;
};

struct StepTaskPlace {
  int procid = 0;         // SLURM_PROCID
  int localid = 0;        // SLURM_LOCALID: its rank on its node within the step
  int nodeid = 0;         // SLURM_NODEID: its node's index within the step
  size_t allocation = 0;  // index into the allocation's nodes
};

struct StepLayout {
  std::vector<size_t> nodes;         // the step's nodes, as indices into the allocation
  std::vector<StepTaskPlace> tasks;  // by procid
};

// Chooses the step's nodes and lays its tasks out in blocks (Slurm's default distribution):
// -w nodes first, then the allocation's others in order, less -x. InvalidArgument, naming the
// option and the allocation's nodes, when the ask cannot be met inside the allocation (with
// gpus_per_task: when a node's tasks need more GPUs than the job has there).
StatusOr<StepLayout> PlanStep(const std::vector<AllocationNode>& allocation, const StepAsk& ask);

struct StepEnvInputs {
  uint64_t job_id = 0;
  uint32_t step_id = 0;
  std::vector<AllocationNode> allocation;
  StepLayout layout;
  int gpus_per_task = 0;  // as StepAsk's
};

// Each task's Slurm variables (by procid): SLURM_PROCID, SLURM_LOCALID, SLURM_NODEID,
// SLURM_STEP_ID/SLURM_STEPID, SLURM_STEP_NODELIST, SLURM_STEP_NUM_NODES, SLURM_STEP_NUM_TASKS,
// SLURM_NTASKS/SLURM_NPROCS, SLURM_NNODES, SLURM_JOB_NODELIST/SLURM_NODELIST (compressed),
// SLURM_JOB_ID, SLURMD_NODENAME, SLURM_TASKS_PER_NODE; with gpus_per_task, CUDA_VISIBLE_DEVICES:
// the task's own GPUs, the node's GPUs of the job taken gpus_per_task at a time in SLURM_LOCALID
// order.
std::vector<std::map<std::string, std::string>> StepTaskEnvironments(const StepEnvInputs& in);

// The allocation's nodes in Slurm's compressed host-list form ("node-[1-2]").
std::string AllocationHostList(const std::vector<AllocationNode>& allocation);

}  // namespace hangar::controller
