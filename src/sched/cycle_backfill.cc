// Backfill: the first job that cannot start reserves nodes; later ones may not delay it. A stage of
// one cycle (cycle.h).
#include "sched/backfill.h"
#include "sched/cycle.h"

namespace hangar::sched::cycle {

Backfill::Backfill(const Context& c) : c_(c) { reserved_nodes_.assign(c.topo.nodes().size(), 0); }

bool Backfill::MayUseReserved(const PendingJob& job) const {
  return !reserved_ || (job.time_limit > 0 && reservation_.start != kNever &&
                        c_.now + job.time_limit <= reservation_.start);
}

void Backfill::Block(const PendingJob& job, const placement::PlaceOptions& opts,
                     std::span<const Placement> placed, ReservationScratch* scratch,
                     std::vector<Reservation>* out) {
  if (!blocked_) first_blocked_ = job.id;
  blocked_ = true;
  if (c_.cfg.backfill != BackfillMode::kEasy || c_.cfg.strict_order || reserved_) return;
  ShadowPlan plan = PlanReservation(c_.work, c_.snap.running, placed, c_.snap.pending, *job.request,
                                    c_.placer, opts, c_.now, scratch);
  if (!plan.found) return;
  reserved_ = true;
  reservation_ = {job.id, plan.start, plan.nodes};
  for (uint32_t n : plan.nodes) reserved_nodes_[n] = 1;
  out->push_back(reservation_);
}

}  // namespace hangar::sched::cycle
