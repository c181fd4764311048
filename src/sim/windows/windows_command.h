// `hangar sim windows`: what reservations and maintenance windows cost on a trace, booked ahead
// or drained without notice (docs/sim-windows.md).
#pragma once

#include <CLI/CLI.hpp>

namespace hangar::sim {

void RegisterWindowsCommand(CLI::App& sim, int* rc);

}  // namespace hangar::sim
