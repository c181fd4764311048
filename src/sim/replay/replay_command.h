// `hangar sim replay`: time-based replay of a trace through the production scheduler.
#pragma once

#include <CLI/CLI.hpp>

namespace hangar::sim {

void RegisterReplayCommand(CLI::App& sim, int* rc);

}  // namespace hangar::sim
