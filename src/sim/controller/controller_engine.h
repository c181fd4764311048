// ControllerEngine: `hangar sim replay --engine controller`. Replays jobs through the controller's
// own state machine (controller::ClusterState, the code `hangar controller` runs) instead of the
// lean Simulator: a virtual clock, every store batch applied to an in-memory store, and
// in-process simulated agents that answer each Launch with "running" and, after the job's run
// time, "exited 0", and each Stop (a preemption) with "stopped" after the preemption grace. What
// the controller decides is read back from the messages it sends, exactly as agents hear it.
//
// Not simulated: heartbeats, telemetry and health (every node is registered and healthy, no
// validation), logs. Single-threaded; one engine per cluster partition.
#pragma once

#include <memory>
#include <vector>

#include "sim/engine/engine.h"

namespace hangar::sim {

// Fails on a configuration the controller cannot run (a policy that needs true run times,
// queues given as a tree without specs).
StatusOr<std::unique_ptr<Engine>> MakeControllerEngine(
    std::shared_ptr<const cluster::Topology> topology, const SimConfig& config);

}  // namespace hangar::sim
