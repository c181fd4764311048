// `hangar jobs -o slurm`: the /v1/jobs list in squeue's columns and state letters, for people whose
// fingers know Slurm (docs/slurm.md).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "api/views.h"
#include "cluster/hostlist.h"
#include "common/time.h"

namespace hangar::cli {

// Slurm's compact state for a Hangar job state: PD R CF CG CD F CA TO (the name itself for a
// state Slurm has no letter for).
std::string SlurmStateLetters(std::string_view hangar_state);
// Slurm's elapsed-time form: M:SS, H:MM:SS, D-HH:MM:SS.
std::string SlurmElapsed(Duration d);
using cluster::CompressHostList;  // cluster/hostlist.h
// JOBID PARTITION NAME USER ST TIME NODES NODELIST(REASON), one row per job, as of `now`.
std::string RenderSqueue(const std::vector<api::JobView>& jobs, Time now);

}  // namespace hangar::cli
