// The lean engine's MIG reshapes (Simulator, SimConfig::mig_reshape): a re-cut GPU takes its new
// layout at once and no task until the reshape's time has passed; what reshaping did.
#pragma once

#include <cstdint>
#include <queue>
#include <utility>
#include <vector>

#include "cluster/usage.h"
#include "sched/snapshot.h"
#include "sim/engine/engine.h"

namespace hangar::sim {

class MigReshapes {
 public:
  explicit MigReshapes(Duration reshape_time) : reshape_time_(reshape_time) {}
  // Re-cuts `plan.gpu` in `usage` at `now`.
  void Start(Time now, const sched::MigReshapePlan& plan, cluster::ClusterUsage& usage);
  // When the next reshape in flight ends; kNever when none.
  Time NextDone() const { return in_flight_.empty() ? kNever : in_flight_.top().first; }
  // The reshapes done by `now` give their GPUs back to work.
  void Finish(Time now, cluster::ClusterUsage& usage);
  const MigReshapeStats& stats() const { return stats_; }

 private:
  Duration reshape_time_;
  // When each GPU's reshape ends.
  std::priority_queue<std::pair<Time, uint32_t>, std::vector<std::pair<Time, uint32_t>>,
                      std::greater<>>
      in_flight_;
  MigReshapeStats stats_;
};

}  // namespace hangar::sim
