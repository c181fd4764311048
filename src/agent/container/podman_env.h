// What the agent's podman process may take from a task's environment. podman runs as the agent
// (root on a real node) and passes a task's variables into the container by name (-e NAME: the
// value from podman's own environment, so that no value is on a command line). A variable that
// the dynamic loader, podman or its Go runtime acts on must not come from the task that way: a job
// asking `LD_PRELOAD`, `PATH` (where the agent looks `podman` up) or `TMPDIR` would otherwise
// choose what root runs. Such a variable reaches the container on podman's command line instead (-e
// NAME=VALUE), and podman keeps the agent's own PATH and HOME.
#pragma once

#include <string>

namespace hangar::agent {

// Whether `name` must not be in the environment of the podman process a task's launch starts.
bool PodmanMustNotInherit(const std::string& name);

}  // namespace hangar::agent
