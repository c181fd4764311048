// Slurm's client commands over Hangar's API, for people and tools that drive Slurm (Snakemake's
// Slurm executor, scripts that call `scontrol show hostnames`): `hangar slurm squeue|sacct|
// scontrol|scancel|sinfo|sacctmgr ARGS` take Slurm's arguments and print Slurm's formats, and
// `hangar slurm install DIR` writes executables of those names (and sbatch, srun, salloc) into
// DIR (docs/slurm.md).
#pragma once

#include <CLI/CLI.hpp>
#include <string>
#include <vector>

namespace hangar::cli {

// Runs Slurm's `tool` with `args` against the API at `server` ("": $HANGAR_URL), printing what
// the tool prints; returns its exit status.
int RunSlurmTool(const std::string& tool, const std::vector<std::string>& args,
                 const std::string& server);

// Writes DIR/NAME for each Slurm command, a script that runs `hangar_binary` with it. Returns
// the names written.
std::vector<std::string> InstallSlurmCommands(const std::string& dir,
                                              const std::string& hangar_binary, std::string* error);

void RegisterSlurmCommands(CLI::App& app, int* rc);

}  // namespace hangar::cli
