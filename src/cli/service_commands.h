// `hangar service ...`: services (docs/services.md), a thin client of /v1/services.
#pragma once

#include <CLI/CLI.hpp>
#include <string>

#include "cli/cli_common.h"
#include "common/status.h"

namespace hangar::cli {

void RegisterServiceCommands(CLI::App& app, int* rc);
// `hangar explain SERVICE` (and a replica's job): why the service has its replicas, and why a
// wanted one waits.
Status ExplainService(const Common& c, const std::string& name);

}  // namespace hangar::cli
