// `hangar sim ...`: the simulator's command line.
#pragma once

#include <CLI/CLI.hpp>

namespace hangar::sim {

// Adds `sim` and its subcommands to `app`; a subcommand's exit status goes to *rc.
void RegisterSimCommand(CLI::App& app, int* rc);

}  // namespace hangar::sim
