// Who the agent acts for, as the agent protocol says it: a job's Unix identity and whether its
// queue allows root. Sent with every launch (the task runs as it) and with every artifact staged
// for the job (a file:// source is read as it).
#pragma once

#include "job/job_spec.h"
#include "proto/agent.pb.h"

namespace hangar::controller {

// Fills `out` from `who`; leaves it untouched when `who` is empty (`--auth none`: the agent acts
// as itself).
void FillRunAs(const job::RunAs& who, bool allow_root, agent::v1::RunAs* out);

}  // namespace hangar::controller
