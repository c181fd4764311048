#include "cli/slurm_commands.h"

namespace hangar::cli {

std::string SlurmCommandHint(std::string_view word) {
  struct Hint {
    std::string_view slurm;
    const char* hangar;
  };
  static constexpr Hint kHints[] = {
      {"squeue",
       "Slurm's squeue is 'hangar jobs -o slurm' here, or 'hangar slurm squeue' with squeue's own "
       "options ('hangar explain ID' says why a job waits)"},
      {"sinfo",
       "Slurm's sinfo is 'hangar nodes' here, or 'hangar slurm sinfo' with sinfo's own options"},
      {"sacct",
       "Slurm's sacct is 'hangar history' here (-o csv for a table), or 'hangar slurm sacct' with "
       "sacct's own options"},
      {"scontrol",
       "Slurm's scontrol is 'hangar slurm scontrol' here (show job|node|hostnames, hold, release, "
       "requeue)"},
      {"scancel",
       "Slurm's scancel is 'hangar cancel' here, or 'hangar slurm scancel' with scancel's own "
       "options"},
      {"sacctmgr",
       "Slurm's sacctmgr is 'hangar slurm sacctmgr' here (accounts are Hangar's queues: 'hangar "
       "queues')"},
      {"srun",
       "Slurm's srun runs inside a batch script here: submit the script with 'hangar sbatch "
       "SCRIPT'"},
      {"salloc",
       "Slurm's salloc is 'hangar slurm salloc' here, with salloc's own options (its shell runs "
       "on the allocation's first node), or 'hangar run -it -- bash' for one task"},
  };
  for (const auto& h : kHints) {
    if (word == h.slurm) return h.hangar;
  }
  return "";
}

}  // namespace hangar::cli
