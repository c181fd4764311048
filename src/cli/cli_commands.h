// The user commands of `hangar`: submit, jobs, job, cancel, explain, logs, nodes, node, drain,
// undrain, events. Tables for people, `-o json` for scripts; the server from --server or
// $HANGAR_URL.
#pragma once

#include <CLI/CLI.hpp>

namespace hangar::cli {

void RegisterUserCommands(CLI::App& app, int* rc);
// apply, queues, share, usage (share_commands.cc).
void RegisterShareCommands(CLI::App& app, int* rc);

}  // namespace hangar::cli
