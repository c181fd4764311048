// The user commands of `hangar`: submit, sbatch (sbatch_command.cc), jobs, job, cancel, explain,
// logs, nodes, node, drain, undrain, events. Tables for people, `-o json` for scripts; the server
// from --server or $HANGAR_URL.
#pragma once

#include <CLI/CLI.hpp>
#include <string>

#include "common/status.h"

namespace hangar::cli {

void RegisterUserCommands(CLI::App& app, int* rc);
// `hangar sbatch SCRIPT` (sbatch_command.cc; docs/slurm.md).
void RegisterSbatchCommand(CLI::App& app, int* rc);
// apply, queues, share, usage (share_commands.cc).
void RegisterShareCommands(CLI::App& app, int* rc);
// `hangar status`: who leads, since when, at which epoch (status_command.cc; docs/ha.md).
void RegisterStatusCommand(CLI::App& app, int* rc);
// `hangar reservation create|list|delete` (reservation_commands.cc; docs/reservations.md).
void RegisterReservationCommands(CLI::App& app, int* rc);
void RegisterMaintainCommands(CLI::App& app, int* rc);  // maintain_commands.cc
// `hangar topology import|diff` (topology_commands.cc; docs/topology-import.md).
void RegisterTopologyCommands(CLI::App& app, int* rc);
// `hangar goodput [JOB]` (goodput_commands.cc; docs/goodput.md).
void RegisterGoodputCommand(CLI::App& app, int* rc);

// OK when `id` can be a job id (digits); otherwise InvalidArgument that says where ids are found.
// Checked before any request, so `hangar cancel llm-serve` does not end in "no such endpoint".
Status CheckJobId(const std::string& id);

}  // namespace hangar::cli
