// `hangar sim mig`: a day of MIG demand through the production scheduler, the best
// static layout against queue-driven reshaping (mig_day.h).
#pragma once

#include <CLI/CLI.hpp>

namespace hangar::sim {

void RegisterMigCommand(CLI::App& sim, int* rc);

}  // namespace hangar::sim
