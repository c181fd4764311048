// A step's task in an OCI image: `srun --container-image=IMAGE
// [--container-mounts=SRC:DST[:ro],...]
// [--container-workdir=DIR]` (pyxis's options; docs/slurm.md, "Steps in a container"). The step's
// task runs as a foreground `podman run --rm` beside the job's task, through the node's podman
// as a container task does (podman.h): as the task's user, with the step task's own GPUs, each
// mount's source opened as that user, checked against containers.mounts_allowed and pinned
// (mount_source.h). Pure but for the pins.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "agent/container/podman.h"
#include "agent/runner/task_credentials.h"
#include "common/status.h"

namespace hangar::agent {

// What srun asked, as the controller sent it.
struct StepContainerAsk {
  std::string image;
  std::vector<std::string> mounts;  // SRC:DST[:ro|rw]
  std::string workdir;              // in the container; empty: the image's
  std::vector<std::string> env;     // NAME=value: the step task's environment
  std::vector<std::string> mounts_allowed;
};

struct StepContainerPlace {
  std::string node, task_id, state_dir;
  uint64_t job_id = 0, session = 0;
  std::optional<TaskCredentials> user;  // the job's task's; nullopt: the agent's own
  std::vector<ContainerGpu> gpus;       // the step task's
};

// pyxis's --container-mounts: comma-separated SRC:DST[:FLAGS], FLAGS ro or rw (read-write by
// default, as pyxis); a single path mounts it at the same place. InvalidArgument naming the entry.
StatusOr<std::vector<ContainerMount>> ParseStepMounts(const std::vector<std::string>& entries);

// The node's GPU indexes a step's task uses: those of its CUDA_VISIBLE_DEVICES among `env` (the
// controller's layout of the step, "KEY=VALUE" entries), else the task's own `task_gpus`. An
// entry that is not an index is left out.
std::vector<uint32_t> StepGpus(const std::vector<std::string>& env,
                               const std::vector<uint32_t>& task_gpus);

// The container's run: its name (unique per session), the image, argv, the environment passed by
// name (its values go in the podman process's own environment: `values` gets them), the mounts
// pinned under StepPinsDir. PATH, HOME and LD_LIBRARY_PATH stay the image's.
StatusOr<ContainerRun> StepContainerRun(const StepContainerAsk& ask, const StepContainerPlace& at,
                                        const std::vector<std::string>& argv,
                                        std::vector<std::pair<std::string, std::string>>* values);

// Where session `session`'s pins of task `task_id` live (beside the task's own, which end with
// the task): <state>/mounts/<task>.step-<session>.
std::string StepPinsDir(const std::string& state_dir, const std::string& task_id, uint64_t session);

// At the task's end: removes the containers of its steps still there (podman killed before its
// container ended) and unpins their mounts.
void ReleaseStepContainers(const Podman* podman, const std::string& node,
                           const std::string& state_dir, const std::string& task_id);

}  // namespace hangar::agent
