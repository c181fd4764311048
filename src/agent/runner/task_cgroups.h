// cgroup v2 plumbing for TaskRunner: a per-agent parent cgroup whose subtree has the cpu and
// memory controllers where the host allows, and under it one cgroup per task holding its limits.
// Each function says why it failed in a sentence, so that the runner can fall back to running
// tasks without a cgroup and tell the log why.
#pragma once

#include <cstdint>
#include <string>

#include "common/status.h"

namespace hangar::agent {

struct AgentCgroup {
  std::string parent;           // empty: tasks run without a cgroup
  bool created_parent = false;  // this process made `parent` (and removes it when empty)
  std::string note;             // no cgroup: why; else which limits can be enforced, and why not
};

// Prepares `requested_parent`, or "/sys/fs/cgroup/hangar-<pid>" when it is empty: its directory
// must be on a writable cgroup2 file system. Enables cpu and memory for the parent's children
// where possible (a cgroup with processes of its own cannot hand controllers down: the agent
// itself stays where it is, so the parent never holds processes). Never fails: an empty
// `parent` says it did not work, and `note` says why.
AgentCgroup SetUpAgentCgroup(const std::string& requested_parent);

// Creates (or reuses) "<parent>/task-<task_id>" and writes cpu.max ("<milli_cpu*100> 100000")
// and memory.max (bytes) for the limits that are positive. On failure nothing is left behind.
StatusOr<std::string> CreateTaskCgroup(const std::string& parent, const std::string& task_id,
                                       int64_t milli_cpu, int64_t memory_mib);

// Removes an empty cgroup directory. True when it is gone (or was never there); false while
// processes remain in it.
bool RemoveCgroup(const std::string& dir);

// The cpu.max line for a CPU limit: a quota per 100 ms period, at least the kernel's 1 ms minimum.
std::string CpuMaxLine(int64_t milli_cpu);

}  // namespace hangar::agent
