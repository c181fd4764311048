// srun as a program that a job's own processes call (Snakemake's `srun -n1 --cpu-bind=q ...`, a
// Python launcher): runs the step's tasks on the node it is called on, with Slurm's variables.
// The batch script's own `srun` (hangar sbatch's prelude) is what fans out over a job's nodes.
#pragma once

#include <string>
#include <vector>

namespace hangar::cli {

// Runs `args` (srun's options, then the command) as a step inside the job this process belongs
// to (HANGAR_JOB_ID set); returns srun's exit status: the highest of its tasks', 128+N for a
// task killed by signal N, 1 for an error it printed.
int RunSrunInJob(const std::vector<std::string>& args);

}  // namespace hangar::cli
