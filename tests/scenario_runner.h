// Golden scenarios (tests/scenarios/<name>/): cluster.yaml, jobs.yaml (jobs with submit times and
// run times) and expected.txt, the decisions and reasons the scheduler must produce, one line per
// event. The runner drives the discrete-event simulator, so scenarios exercise the production
// Scheduler::Cycle end to end.
#pragma once

#include <string>

#include "common/status.h"

namespace hangar::testing {

// Runs the scenario in `dir` and returns its event log (what expected.txt must hold).
StatusOr<std::string> RunScenario(const std::string& dir);

}  // namespace hangar::testing
