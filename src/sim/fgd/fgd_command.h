// `hangar sim fgd`: the FGD evaluation protocol on the openb traces, through Hangar's scheduler.
//
//   hangar sim fgd --nodes NODES.csv --pods PODS.csv --policy NAME --seeds 42-51 [--tune 1.3]
//                  --json OUT.json [--reference DIR] [--threads 2] [--cpu-scale 1.5]
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "sim/fgd/protocol.h"

namespace hangar::sim {

void RegisterFgdCommand(CLI::App& sim, int* rc);

namespace fgd {

struct FgdOptions {
  std::string nodes;
  std::string pods;
  std::string policy;
  std::string seeds = "42-51";
  double tune = 1.3;
  std::string json;
  std::string reference;  // the fgd_reference folder; empty: none
  int threads = 2;
  double cpu_scale = 1.0;  // every pod's CPU request times this (a CPU-heavier mix above 1)
};

// Runs the command: the summary goes to `out`, the report to options.json. A failure is one
// sentence saying what was wrong (the caller prints it and exits with status 2).
Status RunFgdCommand(const FgdOptions& options, std::ostream& out);

// "42-51", "42,43" or a mix ("42-44,50"); at most 10,000 seeds, none twice.
StatusOr<std::vector<int64_t>> ParseSeeds(std::string_view text);

// One run per seed on `threads` threads, each with its own scheduler and usage; the results are
// in seed-list order and do not depend on the thread count.
StatusOr<std::vector<RunResult>> RunSeeds(const OpenbTrace& trace, const std::string& policy,
                                          const std::vector<int64_t>& seeds, double tune,
                                          int threads);

}  // namespace fgd
}  // namespace hangar::sim
