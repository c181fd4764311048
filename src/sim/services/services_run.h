// One run of `hangar sim services` (docs/sim-services.md): a serving fleet (fleet.h) and the jobs
// of a training trace on one cluster, placed by the production scheduler through the lean
// Simulator, in one of two layouts:
//  - shared: one pool; the fleet's queue is guaranteed its `max_replicas` GPUs and training's
//    queue the rest, each lending what it does not use, so training borrows the fleet's idle GPUs
//    and the fleet's replicas reclaim them (SurgeTier says which replicas may);
//  - static: the fleet owns whole nodes enough for `max_replicas` and training the other nodes;
//    neither lends.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "sim/replay/trace.h"
#include "sim/services/fleet.h"
#include "sim/services/fleet_spec.h"

namespace hangar::sim {

struct ServicesScenario {
  std::vector<TraceJob> trace;  // training: the jobs submitted in [from, from + span * load)
  Time from = 0;                // the measured span opens (trace time)
  Duration span = kDay;
  double load = 1;  // arrival gaps divided by this, as `hangar sim replay --load`
  int nodes = 352;  // the cluster: 8-GPU nodes under one switch (Philly's 352 by default)
  int gpus_per_node = 8;
  ServingFleetSpec fleet;
  std::string policy = "fifo-backfill";  // a `hangar sim replay` policy
  Duration restore_cost = 30 * kSecond;  // a preempted training job's, on its next start
  Duration preemption_grace = 0;         // SimConfig::preemption_grace
  Duration lead = kHour;                 // the fleet scales from this long before the span
  Duration tail = 120 * kDay;            // after the span, the fleet serves at most this long
};

enum class FleetLayout : uint8_t { kShared, kStatic };
std::string_view FleetLayoutName(FleetLayout l);  // "shared", "static"

struct TrainingFigures {
  int64_t jobs = 0;        // replayed (submitted in the span and fitting training's partition)
  int64_t too_big = 0;     // left out: larger than training's static partition
  int64_t unfinished = 0;  // still waiting when the simulation ended
  double mean_jct_s = 0, p50_jct_s = 0, p95_jct_s = 0, mean_queue_s = 0;
  int64_t preemptions = 0;  // training jobs stopped for a replica (each comes back)
  double gpu_hours = 0;     // what training jobs held, over the measured span
};

struct ServicesOutcome {
  FleetLayout layout = FleetLayout::kShared;
  int64_t fleet_gpus = 0;     // the fleet's guarantee (shared) or partition (static)
  int64_t training_gpus = 0;  // training's
  TrainingFigures training;
  FleetLedger fleet;
  double wall_s = 0;
};

StatusOr<ServicesOutcome> RunServices(const ServicesScenario& s, FleetLayout layout);

nlohmann::json ServicesJson(const ServicesOutcome& o);

}  // namespace hangar::sim
