// `hangar swarm`: many simulated agents in one process (load generation).
#pragma once

#include <CLI/CLI.hpp>

namespace hangar::swarm {

void RegisterSwarmCommand(CLI::App& app, int* rc);

}  // namespace hangar::swarm
