// Hangar's release version and the version-skew policy between a controller and its agents
// (docs/operations.md, "Versions and upgrades"). The version is CMake's project(VERSION): the one
// place a release bumps it.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "common/status.h"

namespace hangar {

// "0.2.0".
std::string_view Version();

struct ReleaseVersion {
  int major = 0, minor = 0, patch = 0;
};
// "0.2.0", "hangar 0.2.0" or "v0.2.0" (anything after the patch number, such as "-rc1", is
// ignored); nullopt when there is no MAJOR.MINOR.PATCH.
std::optional<ReleaseVersion> ParseReleaseVersion(std::string_view text);

// The policy: an agent registers with a controller of the same major version that is at most one
// minor version ahead of it (controllers upgrade first, agents after, one minor at a time); an
// agent newer than its controller is refused. FailedPrecondition says which side to upgrade. An
// agent that names no version (simulated agents, tests) is accepted.
Status CheckAgentSkew(std::string_view controller, std::string_view agent);

}  // namespace hangar
