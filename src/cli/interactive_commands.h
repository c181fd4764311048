// `hangar exec`, `hangar attach` and `hangar run`: interactive sessions (docs/interactive.md).
#pragma once

#include <CLI/CLI.hpp>

namespace hangar::cli {

void RegisterInteractiveCommands(CLI::App& app, int* rc);

}  // namespace hangar::cli
