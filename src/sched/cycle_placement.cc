// Placement: each job in turn (Run::Examine), the whole gang where it fits now, the answers per
// shape (FailedShapes), and why it waits. A stage of one cycle (cycle.h).
#include "sched/cycle.h"

namespace hangar::sched {

namespace cycle {

const Reason* FailedShapes::Find(const ShapeKey& key) {
  if (last_ && *last_ == key) return &last_reason_;  // a sweep's jobs come one after another
  auto seen = failed_.find(key);
  if (seen == failed_.end()) return nullptr;
  last_ = key;
  last_reason_ = seen->second;
  return &last_reason_;
}

void FailedShapes::Remember(const ShapeKey& key, const Reason& why) {
  failed_.emplace(key, why);
  last_ = key;
  last_reason_ = why;
}

}  // namespace cycle

const Reason& Scheduler::Run::NeverOf(const GangRequest& req) {
  return scheduler_.NeverReason(c_.topo, req);
}

void Scheduler::Run::Examine(uint32_t idx) {
  const Snapshot& snap = c_.snap;
  const PendingJob& job = snap.pending[idx];
  const GangRequest& req = *job.request;
  out_.examined++;
  if (c_.cfg.strict_order && backfill_.blocked()) {
    Reason r;
    r.rule = Rule::kNotNowBlocked;
    r.other = backfill_.first_blocked();
    if (snap.record_waiting) out_.waiting.push_back({job.id, idx, r, {}});
    return;
  }
  // Quota first: a job its queue may not start now waits without holding anyone up.
  const int leaf = ValidLeaf(c_.tree, job.queue) ? static_cast<int>(job.queue) : -1;
  // A job inside a reservation window waits, holding nobody up, until the window opens.
  if (auto closed = windows_.NotOpen(job)) {
    if (snap.record_waiting)
      out_.waiting.push_back({job.id, idx, *closed, windows_.Detail(*closed)});
    return;
  }
  Kind quota = Kind::kWithin;
  if (leaf >= 0 && !Admit(job, idx, leaf, &quota)) return;
  // EASY: a job may use the reserved nodes only if it surely ends before the reservation.
  const bool may_use_reserved = backfill_.MayUseReserved(job);
  window_key_ = windows_.KeyOf(job);
  window_mask_ = windows_.Mask(window_key_, nullptr);
  const ShapeKey key{req.fingerprint,
                     PreemptionRank(c_.cfg.preemption, job),
                     leaf,
                     may_use_reserved,
                     quota,
                     job.tier,
                     window_key_};
  Reason why;
  if (const Reason* seen = failed_.Find(key)) {
    why = *seen;
  } else if (Place(job, idx, leaf, quota, may_use_reserved)) {
    return;
  } else {
    why = Explain(req, may_use_reserved);
    failed_.Remember(key, why);
  }
  if (!why.IsNever() && !backfill_.Settled()) {
    placement::PlaceOptions opts = opts_;
    opts.excluded = window_mask_;  // its shadow plan keeps to the nodes windows leave it
    backfill_.Block(job, opts, out_.placements, &scheduler_.reservation_scratch_,
                    &out_.reservations);
  }
  if (snap.record_waiting) out_.waiting.push_back({job.id, idx, why, windows_.Detail(why)});
}

// Placement: the whole gang where it fits now, or by preempting what it outranks.
bool Scheduler::Run::Place(const PendingJob& job, uint32_t idx, int leaf, Kind quota,
                           bool may_use_reserved) {
  opts_.excluded = windows_.Mask(window_key_, backfill_.Excluded(may_use_reserved));
  opts_.staging_s = job.staging_s;
  placement::PlaceResult r = c_.placer.Place(c_.work, *job.request, opts_);
  opts_.staging_s = nullptr;
  const size_t before = out_.placements.size();
  if (r.placed) {
    Placement p;
    p.job = job.id;
    p.pending_index = idx;
    p.assignment = std::move(r.assignment);
    p.locality = r.locality;
    p.backfilled = backfill_.reserved();
    out_.placements.push_back(std::move(p));
  } else {
    const placement::PlaceOptions opts{opts_.scorer, c_.snap.profile, window_mask_,
                                       c_.snap.random_seed};
    if (NeverOf(*job.request).rule != Rule::kNone ||
        !preemptor_.Try(job, idx, leaf, quota == Kind::kWithin, opts, &out_)) {
      return false;
    }
    failed_.Forget();  // the victims' release may let shapes that failed before fit now
  }
  Placed(job, before, leaf, quota);
  return true;
}

void Scheduler::Run::Placed(const PendingJob& job, size_t placement, int leaf, Kind quota) {
  Placement& p = out_.placements[placement];
  if (leaf >= 0) {
    p.borrowing = quota == Kind::kBorrow;
    admission_->Charge(leaf, *job.request, p.assignment);
    by_share_->Stale(static_cast<uint32_t>(leaf));
  }
  p.borrowing = p.borrowing || job.tier == job::Tier::kOpportunistic;
  gpus_exhausted_ =
      job.request->total_milli_gpu > 0 ? NoGpuLeft(c_.work) : gpus_exhausted_ && NoGpuLeft(c_.work);
}

Reason Scheduler::Run::Explain(const GangRequest& req, bool may_use_reserved) {
  const Reason& never = NeverOf(req);
  Reason why = never.rule != Rule::kNone ? never : placement::ExplainNotNow(c_.work, req, opts_);
  // Kept off nodes: by a reservation window unless EASY's reservation alone keeps it off them.
  if (why.rule == Rule::kNotNowReserved && windows_.Applies(window_key_)) {
    placement::PlaceOptions easy = opts_;
    easy.excluded = backfill_.Excluded(may_use_reserved);
    if (placement::ExplainNotNow(c_.work, req, easy).rule != Rule::kNotNowReserved)
      return windows_.Blame(window_key_);
  }
  if (why.rule == Rule::kNotNowReserved) {
    why.other = backfill_.reservation().job;
    why.at = backfill_.reservation().start;
  }
  return why;
}

}  // namespace hangar::sched
