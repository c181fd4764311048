// Hangar's release version and the version-skew policy between a controller and its agents
// (docs/operations.md, "Versions and upgrades"). The version is CMake's project(VERSION): the one
// place a release bumps it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

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

// What an agent can do beyond what every agent the policy admits can (0.1.0's): negotiated at
// registration, so that a newer controller never sends an older agent a message it would drop.
// Each agent lists the features it has by name in its inventory (Inventory.features); the
// controller keeps the set per node, places a job that needs one only on nodes whose agents
// have it, and refuses a session, a step or a maintenance command to an agent without it.
enum class AgentFeature : uint8_t {
  kTerminals = 1 << 0,       // tasks under a pseudo-terminal or with an open stdin (`hangar run`)
  kSessions = 1 << 1,        // exec, attach and port-forward into a task; srun's steps
  kMaintenance = 1 << 2,     // `hangar maintain`'s commands (which the agent may still refuse)
  kContainerSteps = 1 << 3,  // srun --container-image: a step's task in an image of its own
};
using AgentFeatures = uint8_t;  // a set of AgentFeature bits
inline constexpr AgentFeatures kEveryAgentFeature = 0b1111;
inline constexpr AgentFeatures Bit(AgentFeature f) { return static_cast<AgentFeatures>(f); }

// "terminals", "sessions", "maintenance", "container-steps": the names agents send.
std::string_view AgentFeatureName(AgentFeature f);
// The names of the features in `features`, in bit order (what this agent sends: all of them).
std::vector<std::string> AgentFeatureNames(AgentFeatures features);
// What a registering agent can do. An agent that names no version (simulated agents, tests) can
// do everything; one that names a version has the features it lists (a 0.1.0 agent lists none);
// names this controller does not know (a newer agent's) are ignored.
AgentFeatures AgentFeaturesOf(std::string_view agent_version,
                              const std::vector<std::string>& names);
// Why an agent cannot do `f`, for an error: "node-3's agent runs hangar 0.1.0, which cannot open
// sessions (exec, attach, port-forward, srun steps); upgrade it (docs/operations.md, \"Versions and
// upgrades\")".
std::string AgentLacks(std::string_view node, std::string_view agent_version, AgentFeature f);

}  // namespace hangar
