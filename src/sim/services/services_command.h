// `hangar sim services`: a serving fleet autoscaled to a daily request curve beside a training
// trace, shared against a static partition (docs/sim-services.md).
#pragma once

#include <CLI/CLI.hpp>

namespace hangar::sim {

void RegisterServicesCommand(CLI::App& sim, int* rc);

}  // namespace hangar::sim
