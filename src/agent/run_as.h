// Who a launch or a stage acts for: the controller's RunAs, resolved on this node.
#pragma once

#include <optional>
#include <string>

#include "agent/runner/task_credentials.h"
#include "common/status.h"
#include "proto/agent.pb.h"

namespace hangar::agent {

// The credentials to switch to for `a` (nullptr: none given, `--auth none`: the agent's own user,
// nullopt). Refuses root unless the queue allows it; an agent that is not root acts only as
// itself (then nullopt). Errors name `node`.
StatusOr<std::optional<TaskCredentials>> ResolveRunAs(const v1::RunAs* a, const std::string& node);

}  // namespace hangar::agent
