// Batch commands: `hangar jobs` with filters and pages, `hangar cancel`, `hold`,
// `release` and `requeue` by ids or by selector, and `hangar history` (per-job accounting).
#pragma once

#include <CLI/CLI.hpp>

namespace hangar::cli {

void RegisterBatchCommands(CLI::App& app, int* rc);

}  // namespace hangar::cli
