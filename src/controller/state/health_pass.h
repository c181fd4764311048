// When the controller runs the health rules again (ClusterState::EvaluateHealth), and the GPUs it
// has put in draining, followed until their work is off and they move on to quarantine. An
// evaluation is due after anything the rules read changed (a heartbeat's telemetry, a GPU event, a
// validation, an operator's action), else once per health interval.
#pragma once

#include <cstdint>
#include <set>

#include "common/time.h"

namespace hangar::controller {

class HealthPass {
 public:
  // Something the rules read changed: evaluate at the next chance.
  void Touch() { dirty_ = true; }
  // Whether an evaluation has something to do: a change since the last began, or `interval`
  // passed since then.
  bool Due(Time now, Duration interval) const { return dirty_ || now - last_ >= interval; }
  // An evaluation begins at `now`: every change so far is in it (a change it makes itself touches
  // the pass again).
  void Begin(Time now) {
    dirty_ = false;
    last_ = now;
  }
  // The GPUs (global index) the health engine put in draining.
  std::set<uint32_t>& draining_gpus() { return draining_gpus_; }

 private:
  bool dirty_ = false;
  Time last_ = 0;
  std::set<uint32_t> draining_gpus_;
};

}  // namespace hangar::controller
