// `hangar agent`: the node agent daemon.
#pragma once

#include <CLI/CLI.hpp>

namespace hangar::agent {

void RegisterAgentCommand(CLI::App& app, int* rc);
// `hangar progress STEP`, run inside a task (progress_command.cc).
void RegisterProgressCommand(CLI::App& app, int* rc);
// `hangar preflight`, one rank of a gang preflight, run by the agent (preflight_command.cc).
void RegisterPreflightCommand(CLI::App& app, int* rc);

}  // namespace hangar::agent
