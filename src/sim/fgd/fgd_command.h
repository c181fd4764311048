// `hangar sim fgd`: the FGD evaluation protocol on the openb traces.
#pragma once

#include <CLI/CLI.hpp>

namespace hangar::sim {

void RegisterFgdCommand(CLI::App& sim, int* rc);

}  // namespace hangar::sim
