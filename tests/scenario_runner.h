// Golden scenarios (tests/scenarios/<name>/): cluster.yaml, jobs.yaml (jobs with submit times and
// run times) and expected.txt, the decisions and reasons the scheduler must produce, one line per
// event. The runner drives one of the two owners of the production Scheduler::Cycle: the lean
// discrete-event simulator, or the controller's own state machine (ClusterState, through the
// simulator's controller engine: virtual clock, memory store, simulated agents). Both must
// produce the same log.
#pragma once

#include <string>

#include "common/status.h"

namespace hangar::testing {

enum class Owner { kSimulator, kController };

// Runs the scenario in `dir` and returns its event log (what expected.txt must hold).
StatusOr<std::string> RunScenario(const std::string& dir, Owner owner = Owner::kSimulator);

}  // namespace hangar::testing
