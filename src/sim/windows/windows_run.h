// One comparison of `hangar sim windows` (docs/sim-windows.md): the jobs of a trace on one pool of
// nodes, replayed through the production scheduler three times -- without the windows, with them
// booked ahead, and with their nodes drained at the start without notice (window_keeper.h) -- and
// what each way cost against the first.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "common/status.h"
#include "sim/replay/trace.h"
#include "sim/windows/window_keeper.h"

namespace hangar::sim {

struct WindowsScenario {
  std::vector<TraceJob> trace;  // the jobs submitted in [from, from + span * load)
  Time from = 0;
  Duration span = kDay;
  double load = 1;  // arrival gaps divided by this, as `hangar sim replay --load`
  int nodes = 352;  // 8-GPU nodes under one switch, named node-0, node-1, ...
  int gpus_per_node = 8;
  std::string policy = "fifo-backfill";  // a `hangar sim replay` policy
  WindowKeeperConfig keeper;             // its notice is set per run
};

struct WindowsRun {
  WindowNotice notice = WindowNotice::kNone;
  std::vector<WindowLedger> ledgers;  // by window
  std::vector<Time> ends;             // by job (kNever: unfinished)
  double mean_jct_s = 0, p50_jct_s = 0, p95_jct_s = 0;
  int64_t jobs = 0, too_big = 0;
  double wall_s = 0;
};

// The cluster the scenario's windows name.
std::shared_ptr<const cluster::Topology> WindowsCluster(const WindowsScenario& s);

StatusOr<WindowsRun> RunWindows(const WindowsScenario& s, WindowNotice notice,
                                std::shared_ptr<const cluster::Topology> topology);

// A run's figures beside the baseline's (the run without windows): jobs that ended later than
// there (by over a minute) and by how much in all.
nlohmann::json WindowsJson(const WindowsRun& run, const WindowsRun& baseline,
                           const WindowsScenario& s);

}  // namespace hangar::sim
