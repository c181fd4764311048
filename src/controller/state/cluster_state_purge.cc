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
         !planned_.holds(j.id) && !active_.count(j.id);
}

void ClusterState::PurgeFinished(Time now, Effects* fx) {
  if (options_.keep_finished <= 0) return;
  std::vector<sched::JobId> gone;
  if (!jobs_.empty()) {
    auto it = jobs_.lower_bound(purge_from_);
    if (it == jobs_.end()) it = jobs_.begin();
    const sched::JobId first = it->first;
    for (size_t seen = 0; seen < kPurgeScan; ++seen) {
      if (Purgeable(it->second, now)) gone.push_back(it->first);
      if (++it == jobs_.end()) it = jobs_.begin();  // wrap: the walk goes round and round
      if (it->first == first) break;                // each job at most once a call
    }
    purge_from_ = it->first;
  }
  if (!gone.empty()) {
    Forget(gone, fx);
    purged_since_trim_ += static_cast<int64_t>(gone.size());
    return;
  }
  // A pass found nothing more: what the jobs held is free now, in one piece as far as it will be.
  if (purged_since_trim_ >= 10'000 && options_.after_large_purge) options_.after_large_purge();
  purged_since_trim_ = 0;
}

void ClusterState::Forget(const std::vector<sched::JobId>& ids, Effects* fx) {
  const std::unordered_set<sched::JobId> gone(ids.begin(), ids.end());
  auto not_gone = [&](sched::JobId id) { return !gone.count(id); };
  std::unordered_set<std::string> users;
  std::unordered_set<uint64_t> arrays;
  for (sched::JobId id : ids) {
    auto it = jobs_.find(id);
    const JobRecord& j = it->second;
    users.insert(j.spec->spec.user);
    if (j.array_id) arrays.insert(j.array_id);
    if (Specs().Unref(j.spec->key)) fx->batch.erased_specs.push_back(j.spec->key);
    pending_.erase(id);
    unpinned_.erase(id);
    fx->batch.erased_jobs.push_back(id);
    fx->batch.values.push_back({StepBook::kTable, std::to_string(id), "", true});  // its srun steps
    goodput_.Forget(id);
    jobs_.erase(it);
  }
  // Each index once, however many of its jobs go (an array's 10,000 elements at a time).
  for (const auto& user : users) {
    auto u = jobs_by_user_.find(user);
    if (u == jobs_by_user_.end()) continue;
    std::vector<sched::JobId> kept;
    std::copy_if(u->second.begin(), u->second.end(), std::back_inserter(kept), not_gone);
    if (kept.empty())
      jobs_by_user_.erase(u);
    else
      u->second = std::move(kept);  // a fresh vector: the old one's capacity goes back too
  }
  for (uint64_t array : arrays) {
    auto a = arrays_.find(array);
    if (a == arrays_.end()) continue;
    std::vector<sched::JobId> kept;
    std::copy_if(a->second.elements.begin(), a->second.elements.end(), std::back_inserter(kept),
                 not_gone);
    if (kept.empty())
      arrays_.erase(a);
    else
      a->second.elements = std::move(kept);
  }
}

}  // namespace hangar::controller
