// Slurm's client commands typed as `hangar` commands (`hangar squeue`): the Hangar command that
// does what the Slurm one does, so that a Slurm user is not pointed at the nearest spelling
// (`hangar requeue` stops running jobs).
#pragma once

#include <string>
#include <string_view>

namespace hangar::cli {

// "Slurm's squeue is 'hangar jobs -o slurm' here ..." for squeue, sinfo, sacct and salloc; "" for
// any other word.
std::string SlurmCommandHint(std::string_view word);

}  // namespace hangar::cli
