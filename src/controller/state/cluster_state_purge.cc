// ClusterState: forgetting finished jobs (`--keep-finished`). A controller that kept every job it
// ever ran grew without bound (100 arrays of 10,000 cancelled elements held on to ~450 MB) and
// so did its store; a finished job is kept long enough to be looked at and then forgotten, its
// spec with its last job. Accounting (`hangar usage`) keeps its own rows.
#include <algorithm>
#include <unordered_set>

#include "controller/state/cluster_state.h"
#include "controller/state/step_book.h"

namespace hangar::controller {

bool ClusterState::Purgeable(const JobRecord& j, Time now) const {
  // Nothing of it may be left anywhere: no task still stopping, no share held for it.
  return job::IsFinal(j.state) && j.ended > 0 && now - j.ended >= options_.keep_finished &&
         j.live_tasks == 0 && j.stopping_tasks == 0 && j.awaiting_victims.empty() &&
         !alloc_.planned().holds(j.id) && !jobs_.IsActive(j.id);
}

void ClusterState::PurgeFinished(Time now, Effects* fx) {
  if (options_.keep_finished <= 0) return;
  const std::vector<sched::JobId> gone =
      jobs_.ScanFrom(kPurgeScan, [&](const JobRecord& j) { return Purgeable(j, now); });
  if (!gone.empty()) {
    Forget(gone, fx);
    return;
  }
  // A pass found nothing more: what the jobs held is free now, in one piece as far as it will be.
  if (jobs_.TakeForgotten() >= 10'000 && options_.after_large_purge) options_.after_large_purge();
}

void ClusterState::Forget(const std::vector<sched::JobId>& ids, Effects* fx) {
  const std::unordered_set<sched::JobId> gone(ids.begin(), ids.end());
  std::unordered_set<uint64_t> arrays;
  for (sched::JobId id : ids) {
    const JobRecord& j = jobs_.at(id);
    if (j.array_id) arrays.insert(j.array_id);
    if (Specs().Unref(j.spec->key)) fx->batch.erased_specs.push_back(j.spec->key);
    fx->batch.erased_jobs.push_back(id);
    fx->batch.values.push_back({StepBook::kTable, std::to_string(id), "", true});  // its srun steps
    goodput_.Forget(id);
  }
  jobs_.Forget(ids);
  gates_.ForgetElements(arrays, [&](sched::JobId id) { return gone.count(id) > 0; });
}

}  // namespace hangar::controller
