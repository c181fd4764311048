// `hangar dev`: a whole local cluster in one command -- a controller and one agent per node of
// cluster.yaml (fake GPUs), as real processes, with the store under ./hangar-dev/.
#pragma once

#include <CLI/CLI.hpp>

namespace hangar::controller {

void RegisterDevCommand(CLI::App& app, int* rc);

}  // namespace hangar::controller
