// `hangar agent`: the node agent daemon.
#pragma once

#include <CLI/CLI.hpp>

namespace hangar::agent {

void RegisterAgentCommand(CLI::App& app, int* rc);
// `hangar progress STEP`, run inside a task (progress_command.cc).
void RegisterProgressCommand(CLI::App& app, int* rc);

}  // namespace hangar::agent
