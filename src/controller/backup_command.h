// `hangar backup --store URL --out FILE` and `hangar restore --store URL --in FILE [--force]`: a
// store's rows to a portable file and back (controller/store/backup.h), for SQLite and PostgreSQL.
#pragma once

#include <CLI/CLI.hpp>

namespace hangar::controller {

void RegisterBackupCommands(CLI::App& app, int* rc);

}  // namespace hangar::controller
