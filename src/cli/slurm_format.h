// Slurm's words and forms for Hangar's jobs and nodes, for the Slurm client commands (`hangar
// slurm squeue|sacct|scontrol|sinfo|...`, docs/slurm.md): state names, host lists, times, and
// the field lists of --format/-o.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "api/views.h"
#include "cluster/hostlist.h"
#include "common/status.h"
#include "common/time.h"

namespace hangar::cli::slurm {

// PENDING, CONFIGURING, RUNNING, REQUEUED, COMPLETED, FAILED, CANCELLED, TIMEOUT (what sacct -o
// State and scontrol's JobState= print). A preempted job is REQUEUED: it runs again, and tools
// such as Snakemake take Slurm's PREEMPTED for a failure.
std::string JobState(const api::JobView& j);
// The Hangar states a Slurm state name or letter (-t/--states: pd, r, cd, PENDING, ...) selects;
// an error names the ones Slurm has.
StatusOr<std::vector<std::string>> HangarStates(std::string_view slurm_state);
// IDLE, MIXED, ALLOCATED, DRAINING, DRAINED, DOWN, UNKNOWN; sinfo's short forms with `compact`
// (idle, mix, alloc, drng, drain, down, unk).
std::string NodeState(const api::NodeView& n, bool compact);

using cluster::ExpandHostList;  // cluster/hostlist.h
// The job's nodes in task order, each once.
std::vector<std::string> JobNodes(const api::JobView& j);
// "EXIT:SIGNAL" of the job's worst task, as sacct's ExitCode ("0:0" while none ended).
std::string ExitCode(const api::JobView& j);
// A time as Slurm prints it (2026-12-06T04:50:00, UTC here), "Unknown" for 0 and `unset` given.
std::string Timestamp(Time t, const char* unset = "Unknown");
// The job's time limit as Slurm prints it: UNLIMITED, or [D-]HH:MM:SS.
std::string TimeLimit(const api::JobView& j);
// The job id as squeue and sacct print it: ARRAYID_INDEX for an array element, else the id.
std::string JobId(const api::JobView& j);

// One column of a --format list: "JobIdRaw%20" (sacct), or a squeue "%.18i" item.
struct Field {
  std::string name;  // sacct's field name as given, or squeue's letter
  int width = 0;     // 0: as wide as the value
  bool right = false;
  std::string literal;  // squeue: text between items
};
// sacct's --format: comma-separated names, each with an optional %WIDTH.
StatusOr<std::vector<Field>> ParseSacctFormat(std::string_view text);
// squeue's -o/--format: "%[.][WIDTH]LETTER" items between literal text.
StatusOr<std::vector<Field>> ParseSqueueFormat(std::string_view text);
// `value` fitted to `f`: padded to its width (right-justified with '.') and cut to it.
std::string Fit(const std::string& value, const Field& f);

}  // namespace hangar::cli::slurm
