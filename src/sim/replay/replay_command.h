// `hangar sim replay`: time-based replay of a trace through the production scheduler.
#pragma once

#include <CLI/CLI.hpp>
#include <map>
#include <string>

#include "sim/engine/engine.h"

namespace hangar::sim {

// `engines`: what --engine may name besides "lean" (the Simulator), e.g. "controller".
void RegisterReplayCommand(CLI::App& sim, int* rc,
                           std::map<std::string, EngineFactory> engines = {});

}  // namespace hangar::sim
