// `hangar service ...`: services (docs/services.md), a thin client of /v1/services.
#pragma once

#include <CLI/CLI.hpp>

namespace hangar::cli {

void RegisterServiceCommands(CLI::App& app, int* rc);

}  // namespace hangar::cli
