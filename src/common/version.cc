#include "common/version.h"

#include <charconv>

namespace hangar {

std::string_view Version() { return HANGAR_VERSION; }

std::optional<ReleaseVersion> ParseReleaseVersion(std::string_view text) {
  const size_t digit = text.find_first_of("0123456789");
  if (digit == std::string_view::npos) return std::nullopt;
  const char* p = text.data() + digit;
  const char* end = text.data() + text.size();
  ReleaseVersion v;
  int* parts[] = {&v.major, &v.minor, &v.patch};
  for (int i = 0; i < 3; ++i) {
    auto [next, ec] = std::from_chars(p, end, *parts[i]);
    if (ec != std::errc()) return std::nullopt;
    p = next;
    if (i < 2) {
      if (p == end || *p != '.') return std::nullopt;
      ++p;
    }
  }
  return v;
}

Status CheckAgentSkew(std::string_view controller, std::string_view agent) {
  if (agent.empty()) return Status::Ok();
  const auto c = ParseReleaseVersion(controller);
  const auto a = ParseReleaseVersion(agent);
  const std::string said = "the agent runs " + std::string(agent) + ", this controller hangar " +
                           std::string(controller);
  if (!c || !a)
    return Status::FailedPrecondition(
        said + ": the agent's version cannot be read; install a released agent");
  const std::string policy =
      " (the policy: a controller may be at most one minor version ahead of its agents, never "
      "behind; "
      "docs/operations.md, \"Versions and upgrades\")";
  if (a->major != c->major) {
    return Status::FailedPrecondition(said + ": a different major version" + policy +
                                      "; upgrade both to the same major version");
  }
  if (a->minor > c->minor || (a->minor == c->minor && a->patch > c->patch)) {
    return Status::FailedPrecondition(said + ": the agent is newer than its controller" + policy +
                                      "; upgrade the controller first");
  }
  if (c->minor - a->minor > 1) {
    return Status::FailedPrecondition(said +
                                      ": the controller is more than one minor version ahead" +
                                      policy + "; upgrade the agent");
  }
  return Status::Ok();
}

std::string_view AgentFeatureName(AgentFeature f) {
  switch (f) {
    case AgentFeature::kTerminals:
      return "terminals";
    case AgentFeature::kSessions:
      return "sessions";
    case AgentFeature::kMaintenance:
      return "maintenance";
    case AgentFeature::kContainerSteps:
      return "container-steps";
  }
  return "";
}

namespace {
constexpr AgentFeature kFeatures[] = {AgentFeature::kTerminals, AgentFeature::kSessions,
                                      AgentFeature::kMaintenance, AgentFeature::kContainerSteps};

// What the feature lets an agent do, for a sentence: "cannot <this>".
std::string_view FeatureWork(AgentFeature f) {
  switch (f) {
    case AgentFeature::kTerminals:
      return "run a task under a terminal or with an open stdin (`hangar run -i/-t`, salloc)";
    case AgentFeature::kSessions:
      return "open sessions into tasks (exec, attach, port-forward, srun steps)";
    case AgentFeature::kMaintenance:
      return "run maintenance commands (`hangar maintain`)";
    case AgentFeature::kContainerSteps:
      return "run a step in a container (srun --container-image)";
  }
  return "";
}
}  // namespace

std::vector<std::string> AgentFeatureNames(AgentFeatures features) {
  std::vector<std::string> out;
  for (AgentFeature f : kFeatures) {
    if (features & Bit(f)) out.emplace_back(AgentFeatureName(f));
  }
  return out;
}

AgentFeatures AgentFeaturesOf(std::string_view agent_version,
                              const std::vector<std::string>& names) {
  if (agent_version.empty()) return kEveryAgentFeature;
  AgentFeatures out = 0;
  for (const std::string& name : names) {
    for (AgentFeature f : kFeatures) {
      if (name == AgentFeatureName(f)) out |= Bit(f);
    }
  }
  return out;
}

std::string AgentLacks(std::string_view node, std::string_view agent_version, AgentFeature f) {
  return std::string(node) + "'s agent runs " +
         (agent_version.empty() ? std::string("an unnamed version") : std::string(agent_version)) +
         ", which cannot " + std::string(FeatureWork(f)) + "; upgrade its agent to hangar " +
         std::string(Version()) + " (docs/operations.md, \"Versions and upgrades\")";
}

}  // namespace hangar
