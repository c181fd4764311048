// Admission: what runs is charged to its queue, and whether a job's queue may start it now. A stage
// of Scheduler::Run (cycle.h).
#include "sched/cycle.h"

namespace hangar::sched {

// Admission: charge what runs to its queue.
void Scheduler::Run::ChargeRunning() {
  ledger_.emplace(tree_);
  running_charge_.assign(snap_.running.size(), nullptr);
  charge_store_.reserve(snap_.running.size());
  for (size_t i = 0; i < snap_.running.size(); ++i) {
    const RunningJob& r = snap_.running[i];
    if (!ValidLeaf(tree_, r.queue) || !r.assignment) continue;
    if (r.charge) {
      running_charge_[i] = r.charge;
    } else {
      charge_store_.push_back(tree_->Charge(*r.request, r.assignment, topo_));
      running_charge_[i] = &charge_store_.back();
    }
    ledger_->Add(static_cast<int>(r.queue), *running_charge_[i]);
  }
  if (!cfg_.preemption.reclaim_quota) return;
  for (size_t i = 0; i < snap_.running.size() && !reclaim_possible_; ++i) {
    const RunningJob& r = snap_.running[i];
    reclaim_possible_ = r.tier == job::Tier::kOpportunistic ||
                        (ValidLeaf(tree_, r.queue) &&
                         ledger_->Borrowed(static_cast<int>(r.queue), queue::kGpu) > 0);
  }
}

// Admission: false when the job's queue may not start it now (its verdict is recorded).
bool Scheduler::Run::Admit(const PendingJob& job, uint32_t idx, int leaf, Kind* quota) {
  const ShapeKey key{job.request->fingerprint, 0, leaf, false, Kind::kWithin, job.tier};
  auto [it, fresh] = quota_answers_.try_emplace(key);
  QuotaAnswer& a = it->second;
  if (fresh) {
    std::vector<int64_t> computed;
    if (!job.charge) computed = tree_->Charge(*job.request, nullptr, topo_);
    a.verdict = ledger_->Check(leaf, job.charge ? *job.charge : computed,
                               job.tier == job::Tier::kGuaranteed);
  }
  const queue::QuotaLedger::Verdict& qv = a.verdict;
  *quota = qv.kind;
  if (qv.kind != Kind::kDenied) return true;
  const Reason& never = NeverOf(*job.request);
  Verdict v{job.id, idx, never, {}};
  if (never.rule == Rule::kNone) {
    v.reason.rule = Rule::kNotNowQuota;
    v.reason.need = qv.need;
    v.reason.have = qv.have;
    if (snap_.record_waiting) {  // the words only for an owner that reads them, once per (queue,
                                 // shape)
      if (a.detail.empty()) a.detail = ledger_->Explain(qv, leaf);
      v.detail = a.detail;
    }
  }
  out_.waiting.push_back(std::move(v));
  return false;
}

}  // namespace hangar::sched
