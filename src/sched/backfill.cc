#include "sched/backfill.h"

#include <algorithm>

namespace hangar::sched {

ShadowPlan PlanReservation(const cluster::ClusterUsage& work, std::span<const RunningJob> running,
                           std::span<const Placement> placed, std::span<const PendingJob> pending,
                           const GangRequest& req, placement::GangPlacer& placer,
                           const placement::PlaceOptions& opts, Time now,
                           ReservationScratch* scratch) {
  ReservationScratch own;
  ReservationScratch& sc = scratch ? *scratch : own;
  using Release = ReservationScratch::Release;
  std::vector<Release>& releases = sc.releases;
  releases.clear();
  releases.reserve(running.size() + placed.size());
  for (const auto& r : running) {
    if (r.assignment) releases.push_back({std::max(r.expected_end, now), r.id, r.assignment});
  }
  for (const auto& p : placed) {
    const Duration limit = pending[p.pending_index].time_limit;
    releases.push_back({limit > 0 ? now + limit : kNever, p.job, &p.assignment});
  }
  // Usually the first few releases make room: take them off a heap rather than sort them all.
  auto later = [](const Release& a, const Release& b) {
    return a.end != b.end ? a.end > b.end : a.id > b.id;
  };
  std::make_heap(releases.begin(), releases.end(), later);
  if (sc.future) {
    *sc.future = work;
  } else {
    sc.future.emplace(work);
  }
  cluster::ClusterUsage& future = *sc.future;
  placement::PlaceOptions free_opts = opts;
  free_opts.excluded =
      opts.excluded;  // the caller's: nodes the job may never use (windows), not EASY's
  ShadowPlan plan;
  while (!releases.empty()) {
    const Time end = releases.front().end;
    while (!releases.empty() && releases.front().end == end) {
      std::pop_heap(releases.begin(), releases.end(), later);
      future.Release(*releases.back().assignment);
      releases.pop_back();
    }
    // A cheap necessary condition before a full placement attempt.
    const auto& all = future.domain(cluster::Level::kCluster, 0);
    if (all.free_whole < req.total_whole_gpus || all.free_milli < req.total_milli_gpu) continue;
    placement::PlaceResult r = placer.Place(future, req, free_opts);
    if (!r.placed) continue;
    plan.found = true;
    plan.start = end;
    for (const auto& t : r.assignment.tasks) plan.nodes.push_back(t.node);
    std::sort(plan.nodes.begin(), plan.nodes.end());
    plan.nodes.erase(std::unique(plan.nodes.begin(), plan.nodes.end()), plan.nodes.end());
    return plan;
  }
  return plan;
}

}  // namespace hangar::sched
