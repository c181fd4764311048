// `salloc` (docs/slurm.md, "Interactive allocations"): Slurm's options, read as `hangar sbatch`
// reads them, hold an allocation as one interactive job, and a shell -- or the command given --
// runs on its first node under a terminal attached here, as `hangar run -it` attaches; `srun`
// inside it runs steps across the allocation, with SLURM_JOB_ID, SLURM_JOB_NODELIST and the rest
// set. One difference from Slurm, said in the docs: Slurm runs salloc's shell where salloc was
// typed; here it runs on the allocation's first node.
#pragma once

#include <string>
#include <vector>

#include "cli/sbatch.h"
#include "common/status.h"

namespace hangar::cli {

// salloc's command line split: its options, and the command after them ("" words: none, which
// is the user's shell). `--` ends the options.
struct SallocLine {
  std::vector<std::string> options;
  std::vector<std::string> command;
};
SallocLine SplitSallocLine(const std::vector<std::string>& args);

// The allocation as a job file (interactive; with a terminal when `tty`, else with salloc's
// stdin passed to it), from salloc's line.
StatusOr<sbatch::BatchJob> SallocJob(const SallocLine& line, const std::string& submit_dir,
                                     bool tty);

// `hangar slurm salloc ARGS` (the `salloc` that `hangar slurm install` writes): submits the
// allocation, waits for it ("salloc: Granted job allocation N"), runs the shell or command there;
// salloc's exit status is the program's.
int RunSalloc(const std::vector<std::string>& args, const std::string& server);

}  // namespace hangar::cli
