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
};

// The wrapper's text: the task runs /bin/sh -c WRAPPER NAME SCRIPT.
std::string Wrapper(const WrapperInputs& w);

// --output/--error patterns as a /bin/sh word, expanded when the task runs: %j %A %a %x %N %n %u
// %t (the task: the node's first) %s and %J (the batch step) %% (with zero-padding, %4a); Fails
// naming the pattern and the letter for others.
StatusOr<std::string> OutputPatternToShell(std::string_view pattern, const std::string& job_name);

}  // namespace hangar::cli::sbatch
