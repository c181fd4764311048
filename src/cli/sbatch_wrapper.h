// The command a task of `hangar sbatch`'s job runs: a /bin/sh wrapper that plays Slurm's batch
// step around the user's script (docs/slurm.md): Slurm's variables, an `srun` on PATH that runs
// its command once per task of this node, the --output/--error files, and the signals.
#pragma once

#include <string>
#include <string_view>

#include "common/status.h"

namespace hangar::cli::sbatch {

struct WrapperInputs {
  std::string trap_signals;  // "TERM USR1"
  int tasks_per_node = 1;
  std::string redirect;  // "> \"out\" 2>&1"
  // The script's #! line starts bash as a login shell (LoginBashScript): its /etc/profile resets
  // PATH, so Slurm's commands reach it as exported bash functions too.
  bool login_bash = false;
  // A heterogeneous job's components (1: none): the script sees each one's nodes as
  // SLURM_JOB_NODELIST_HET_GROUP_<n> (from the controller's HANGAR_GROUP_NODES_<n>).
  int components = 1;
};

// Whether `script`'s #! line runs bash as a login shell: `#!/bin/bash -l`, `--login`, `-leo
// pipefail`, `#!/usr/bin/env -S bash -l`.
bool LoginBashScript(std::string_view script);

// The wrapper's text: the task runs /bin/sh -c WRAPPER NAME SCRIPT.
std::string Wrapper(const WrapperInputs& w);

// --output/--error patterns as a /bin/sh word, expanded when the task runs: %j %A %a %x %N %n %u
// %t (the task: the node's first) %s and %J (the batch step) %% (with zero-padding, %4a); Fails
// naming the pattern and the letter for others.
StatusOr<std::string> OutputPatternToShell(std::string_view pattern, const std::string& job_name);

}  // namespace hangar::cli::sbatch
