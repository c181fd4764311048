// The environment a task is started with: which GPUs it sees, who it is in the job, and the
// torchrun rendezvous variables a distributed job expects (one process per task).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "cluster/usage.h"
#include "job/job_spec.h"

namespace hangar::controller {

struct LaunchContext {
  uint64_t job_id = 0;
  uint32_t attempt = 0;
  uint32_t restarts = 0;
  const job::JobSpec* spec = nullptr;
  const cluster::GangAssignment* assignment = nullptr;  // tasks in (group, replica) order
  const cluster::Topology* topology = nullptr;
  std::function<std::string(uint32_t node)> address_of;  // where a node's tasks are reachable
  int master_port = 0;
  std::string checkpoint_dir;  // the job's, the same across restarts
  uint64_t array_id = 0;       // an array element's array (HANGAR_ARRAY_JOB_ID) and index
  int64_t array_index = -1;
};

// One environment per task, in task order. RANK is the task's index, WORLD_SIZE the number of
// tasks; NODE_RANK numbers the gang's nodes in order of their first task; LOCAL_RANK and
// LOCAL_WORLD_SIZE count tasks on the same node; MASTER_ADDR is task 0's node. torchrun's own
// PET_NNODES, PET_NODE_RANK, PET_MASTER_ADDR, PET_MASTER_PORT and PET_NPROC_PER_NODE (whole GPUs)
// treat each task as one torchrun node, unless the job's env sets them.
std::vector<std::map<std::string, std::string>> TaskEnvironments(const LaunchContext& ctx);

// "3" -> "0,1,2" style list of the GPU indices a task holds on its node.
std::vector<uint32_t> GpuIndices(const cluster::Topology& t, const cluster::GangAssignment& a,
                                 const cluster::TaskPlacement& task);

}  // namespace hangar::controller
