// What a process started beside a running task (`hangar exec`) inherits from it, read from the
// kernel's view of the task's leader (/proc/PID): its user and groups, its environment (the
// HANGAR_* variables, CUDA_VISIBLE_DEVICES and NVIDIA_VISIBLE_DEVICES as the task got them), its
// cgroup and its working directory. Reading the leader rather than the launch keeps it true after
// an agent restart, and never gives the new process more than the task has: it runs as the
// task's uid, so root only when the task itself runs as root.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

#include "agent/runner/task_credentials.h"
#include "common/status.h"

namespace hangar::agent {

struct TaskSurroundings {
  TaskCredentials credentials;   // the leader's effective uid, gid and supplementary groups
  std::vector<std::string> env;  // "NAME=value", as the task started
  std::string cgroup_dir;        // its cgroup v2 directory; empty: none found
  std::string workdir;           // its working directory
};

// Reads them from `proc` (normally "/proc") for process `pid`. NotFound, saying so, when the
// process is gone; FailedPrecondition when what it needs cannot be read.
StatusOr<TaskSurroundings> ReadTaskSurroundings(pid_t pid, const std::string& proc = "/proc",
                                                const std::string& cgroup_root = "/sys/fs/cgroup");

// `env` with NAME set to `value` (replacing an earlier NAME).
void SetEnv(std::vector<std::string>* env, const std::string& name, const std::string& value);

}  // namespace hangar::agent
