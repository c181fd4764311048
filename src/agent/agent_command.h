// `hangar agent`: the node agent daemon.
#pragma once

#include <CLI/CLI.hpp>

namespace hangar::agent {

void RegisterAgentCommand(CLI::App& app, int* rc);

}  // namespace hangar::agent
