// A container task's mount sources (mounts: ["/data/x:/x"]), pinned before podman sees them. Each
// source is opened as the task's user (open_as_user.h: every link followed and every folder on
// the way checked as that user); what it resolved to must lie under containers.mounts_allowed;
// and that very file or folder -- the open descriptor, not its path -- is bind-mounted at a path
// only the agent can reach (<state>/mounts/<task>/<n>), which is what podman is given.
//
// Why a pin rather than the resolved path: podman and its runtime resolve the path they are given
// again, later, so a folder the user may write could be swapped for a link between the agent's
// check and the mount. A re-check after podman has mounted would come too late, and handing
// podman /proc/<agent>/fd/N would rely on neither podman nor the runtime turning it back into a
// path. A bind mount of the descriptor leaves nothing to swap: no user can write under the pin.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "agent/container/podman.h"
#include "agent/runner/task_credentials.h"
#include "common/status.h"

namespace hangar::agent {

// Pins `host` at `at` (which must not exist; its folder must) and returns `at`. `what` names the
// mount in errors ("mount /data/x:/x"). Errors are OpenAsUser's (a source the user cannot reach
// gets one sentence, whether or not it exists), or say why the bind mount failed.
StatusOr<std::string> PinMountSource(const std::string& host,
                                     const std::optional<TaskCredentials>& who,
                                     const std::vector<std::string>& allowed, const std::string& at,
                                     const std::string& what);

// Unmounts every pin in `dir` (a task's folder of pins) and removes the folder.
void UnpinMounts(const std::string& dir);

// `mounts` (host path -> container path) each opened as `who`, checked against `allowed` and
// pinned under the folder `pins` (an earlier try's pins dropped first; it and its parent made the
// agent's only): the same mounts by their pins, in order. On a refusal nothing stays pinned.
StatusOr<std::vector<ContainerMount>> PinMounts(const std::vector<ContainerMount>& mounts,
                                                const std::optional<TaskCredentials>& who,
                                                const std::vector<std::string>& allowed,
                                                const std::string& pins);

}  // namespace hangar::agent
