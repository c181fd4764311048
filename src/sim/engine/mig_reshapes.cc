#include "sim/engine/mig_reshapes.h"

#include <bit>

#include "sched/mig_reshape.h"

namespace hangar::sim {

void MigReshapes::Start(Time now, const sched::MigReshapePlan& plan, cluster::ClusterUsage& usage) {
  usage.SetMigLayout(plan.gpu, plan.after);
  usage.SetMigReshaping(plan.gpu, true);
  in_flight_.push({now + reshape_time_, plan.gpu});
  ++stats_.reshapes;
  stats_.instances_created += std::popcount(sched::MigStartsToCreate(plan.before, plan.after));
  stats_.instances_destroyed += std::popcount(sched::MigStartsToDestroy(plan.before, plan.after));
}

void MigReshapes::Finish(Time now, cluster::ClusterUsage& usage) {
  while (!in_flight_.empty() && in_flight_.top().first <= now) {
    usage.SetMigReshaping(in_flight_.top().second, false);
    in_flight_.pop();
  }
}

}  // namespace hangar::sim
