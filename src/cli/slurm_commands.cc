#include "cli/slurm_commands.h"

namespace hangar::cli {

std::string SlurmCommandHint(std::string_view word) {
  struct Hint {
    std::string_view slurm;
    const char* hangar;
  };
  static constexpr Hint kHints[] = {
      {"squeue",
       "Slurm's squeue is 'hangar jobs -o slurm' here (add --state pending for squeue -t PD; "
       "'hangar explain ID' says why a job waits)"},
      {"sinfo", "Slurm's sinfo is 'hangar nodes' here ('hangar node NAME' for one node)"},
      {"sacct",
       "Slurm's sacct is 'hangar history' here (-o csv for a table; 'hangar jobs' for states)"},
      {"salloc",
       "Slurm's salloc (an interactive allocation) has no Hangar command: submit the work with "
       "'hangar sbatch SCRIPT' or 'hangar submit JOB.yaml' and follow it with 'hangar logs -f ID'"},
  };
  for (const auto& h : kHints) {
    if (word == h.slurm) return h.hangar;
  }
  return "";
}

}  // namespace hangar::cli
