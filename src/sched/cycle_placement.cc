// Placement: each job in turn, the whole gang where it fits now, and why it waits. A stage of
// Scheduler::Run (cycle.h).
#include "sched/cycle.h"

namespace hangar::sched {

const Reason& Scheduler::Run::NeverOf(const GangRequest& req) {
  return scheduler_.NeverReason(topo_, req);
}

void Scheduler::Run::Examine(uint32_t idx) {
  const PendingJob& job = snap_.pending[idx];
  const GangRequest& req = *job.request;
  out_.examined++;
  if (cfg_.strict_order && blocked_) {
    Reason r;
    r.rule = Rule::kNotNowBlocked;
    r.other = first_blocked_;
    if (snap_.record_waiting) out_.waiting.push_back({job.id, idx, r, {}});
    return;
  }
  // Quota first: a job its queue may not start now waits without holding anyone up.
  const int leaf = ValidLeaf(tree_, job.queue) ? static_cast<int>(job.queue) : -1;
  // A job inside a reservation window waits, holding nobody up, until the window opens.
  if (auto closed = windows_.NotOpen(job)) {
    if (snap_.record_waiting)
      out_.waiting.push_back({job.id, idx, *closed, windows_.Detail(*closed)});
    return;
  }
  Kind quota = Kind::kWithin;
  if (leaf >= 0 && !Admit(job, idx, leaf, &quota)) return;
  // EASY: a job may use the reserved nodes only if it surely ends before the reservation.
  const bool may_use_reserved = !reserved_ || (job.time_limit > 0 && reservation_.start != kNever &&
                                               now_ + job.time_limit <= reservation_.start);
  window_key_ = windows_.KeyOf(job);
  window_mask_ = windows_.Mask(window_key_, nullptr);
  const ShapeKey key{req.fingerprint,
                     PreemptionRank(cfg_.preemption, job),
                     leaf,
                     may_use_reserved,
                     quota,
                     job.tier,
                     window_key_};
  Reason why;
  if (last_failed_ && *last_failed_ == key) {  // a sweep's jobs come one after another
    why = last_reason_;
  } else if (auto seen = failed_.find(key); seen != failed_.end()) {
    why = seen->second;
    last_failed_ = key;
    last_reason_ = why;
  } else if (Place(job, idx, leaf, quota, may_use_reserved)) {
    return;
  } else {
    why = Explain(req, may_use_reserved);
    failed_.emplace(key, why);
    last_failed_ = key;
    last_reason_ = why;
  }
  // Block does nothing more once a job is blocked and either the reservation is made or there is
  // none to make.
  const bool block_done =
      blocked_ && (reserved_ || cfg_.backfill != BackfillMode::kEasy || cfg_.strict_order);
  if (!why.IsNever() && !block_done) Block(job);
  if (snap_.record_waiting) out_.waiting.push_back({job.id, idx, why, windows_.Detail(why)});
}

// Placement: the whole gang where it fits now, or by preempting what it outranks.
bool Scheduler::Run::Place(const PendingJob& job, uint32_t idx, int leaf, Kind quota,
                           bool may_use_reserved) {
  opts_.excluded = windows_.Mask(window_key_, may_use_reserved ? nullptr : &reserved_nodes_);
  opts_.staging_s = job.staging_s;
  placement::PlaceResult r = placer_.Place(work_, *job.request, opts_);
  opts_.staging_s = nullptr;
  const size_t before = out_.placements.size();
  if (r.placed) {
    Placement p;
    p.job = job.id;
    p.pending_index = idx;
    p.assignment = std::move(r.assignment);
    p.locality = r.locality;
    p.backfilled = reserved_;
    out_.placements.push_back(std::move(p));
  } else if (NeverOf(*job.request).rule != Rule::kNone ||
             !TryPreempt(job, idx, leaf, quota == Kind::kWithin)) {
    return false;
  }
  Placed(job, before, leaf, quota);
  return true;
}

void Scheduler::Run::Placed(const PendingJob& job, size_t placement, int leaf, Kind quota) {
  Placement& p = out_.placements[placement];
  if (leaf >= 0) {
    p.borrowing = quota == Kind::kBorrow;
    ledger_->Add(leaf, tree_->Charge(*job.request, &p.assignment, topo_));
    stale_[static_cast<uint32_t>(leaf)] = 1;
    quota_answers_.clear();
  }
  p.borrowing = p.borrowing || job.tier == job::Tier::kOpportunistic;
  gpus_exhausted_ =
      job.request->total_milli_gpu > 0 ? NoGpuLeft(work_) : gpus_exhausted_ && NoGpuLeft(work_);
}

Reason Scheduler::Run::Explain(const GangRequest& req, bool may_use_reserved) {
  const Reason& never = NeverOf(req);
  Reason why = never.rule != Rule::kNone ? never : placement::ExplainNotNow(work_, req, opts_);
  // Kept off nodes: by a reservation window unless EASY's reservation alone keeps it off them.
  if (why.rule == Rule::kNotNowReserved && windows_.Applies(window_key_)) {
    placement::PlaceOptions easy = opts_;
    easy.excluded = may_use_reserved ? nullptr : &reserved_nodes_;
    if (placement::ExplainNotNow(work_, req, easy).rule != Rule::kNotNowReserved)
      return windows_.Blame(window_key_);
  }
  if (why.rule == Rule::kNotNowReserved) {
    why.other = reservation_.job;
    why.at = reservation_.start;
  }
  return why;
}

}  // namespace hangar::sched
