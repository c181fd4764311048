// `hangar controller`: the daemon that owns the cluster state.
#pragma once

#include <CLI/CLI.hpp>

namespace hangar::controller {

void RegisterControllerCommand(CLI::App& app, int* rc);

}  // namespace hangar::controller
