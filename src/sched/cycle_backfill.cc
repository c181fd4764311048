// Backfill: the first job that cannot start reserves nodes; later ones may not delay it. A stage of
// Scheduler::Run (cycle.h).
#include "sched/backfill.h"
#include "sched/cycle.h"

namespace hangar::sched {

// Backfill: the first job that cannot start now reserves nodes (EASY); later ones may not
// delay it.
void Scheduler::Run::Block(const PendingJob& job) {
  if (!blocked_) first_blocked_ = job.id;
  blocked_ = true;
  if (cfg_.backfill != BackfillMode::kEasy || cfg_.strict_order || reserved_) return;
  opts_.excluded = window_mask_;  // its shadow plan keeps to the nodes windows leave it
  ShadowPlan plan =
      PlanReservation(work_, snap_.running, out_.placements, snap_.pending, *job.request, placer_,
                      opts_, now_, &scheduler_.reservation_scratch_);
  if (!plan.found) return;
  reserved_ = true;
  reservation_ = {job.id, plan.start, plan.nodes};
  for (uint32_t n : plan.nodes) reserved_nodes_[n] = 1;
  out_.reservations.push_back(reservation_);
}

}  // namespace hangar::sched
