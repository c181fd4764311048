// Admission (QuotaAdmission): what runs is charged to its queue, and whether a job's queue may
// start it now. A stage of one cycle (cycle.h).
#include "sched/cycle.h"

namespace hangar::sched {

namespace cycle {

// Charges what runs to its queue.
QuotaAdmission::QuotaAdmission(const Context& c) : c_(c), ledger_(c.tree) {
  const std::span<const RunningJob> running = c.snap.running;
  running_charge_.assign(running.size(), nullptr);
  charge_store_.reserve(running.size());
  for (size_t i = 0; i < running.size(); ++i) {
    const RunningJob& r = running[i];
    if (!ValidLeaf(c.tree, r.queue) || !r.assignment) continue;
    if (r.charge) {
      running_charge_[i] = r.charge;
    } else {
      charge_store_.push_back(c.tree->Charge(*r.request, r.assignment, c.topo));
      running_charge_[i] = &charge_store_.back();
    }
    ledger_.Add(static_cast<int>(r.queue), *running_charge_[i]);
  }
  if (!c.cfg.preemption.reclaim_quota) return;
  for (size_t i = 0; i < running.size() && !reclaim_possible_; ++i) {
    const RunningJob& r = running[i];
    reclaim_possible_ = r.tier == job::Tier::kOpportunistic ||
                        (ValidLeaf(c.tree, r.queue) &&
                         ledger_.Borrowed(static_cast<int>(r.queue), queue::kGpu) > 0);
  }
}

QuotaAdmission::Answer& QuotaAdmission::Check(const PendingJob& job, int leaf) {
  const ShapeKey key{job.request->fingerprint,          0,       leaf, false,
                     queue::QuotaLedger::Kind::kWithin, job.tier};
  auto [it, fresh] = answers_.try_emplace(key);
  Answer& a = it->second;
  if (fresh) {
    std::vector<int64_t> computed;
    if (!job.charge) computed = c_.tree->Charge(*job.request, nullptr, c_.topo);
    a.verdict = ledger_.Check(leaf, job.charge ? *job.charge : computed,
                              job.tier == job::Tier::kGuaranteed);
  }
  return a;
}

const std::string& QuotaAdmission::Detail(Answer& a, int leaf) const {
  if (a.detail.empty()) a.detail = ledger_.Explain(a.verdict, leaf);
  return a.detail;
}

void QuotaAdmission::Charge(int leaf, const GangRequest& req, const cluster::GangAssignment& a) {
  ledger_.Add(leaf, c_.tree->Charge(req, &a, c_.topo));
  answers_.clear();
}

bool QuotaAdmission::Release(size_t running) {
  const std::vector<int64_t>* charge = running_charge_[running];
  if (!charge || charge->empty()) return false;
  ledger_.Remove(static_cast<int>(c_.snap.running[running].queue), *charge);
  answers_.clear();
  return true;
}

}  // namespace cycle

// Admission: false when the job's queue may not start it now (its verdict is recorded).
bool Scheduler::Run::Admit(const PendingJob& job, uint32_t idx, int leaf, Kind* quota) {
  cycle::QuotaAdmission::Answer& a = admission_->Check(job, leaf);
  const queue::QuotaLedger::Verdict& qv = a.verdict;
  *quota = qv.kind;
  if (qv.kind != Kind::kDenied) return true;
  const Reason& never = NeverOf(*job.request);
  Verdict v{job.id, idx, never, {}};
  if (never.rule == Rule::kNone) {
    v.reason.rule = Rule::kNotNowQuota;
    v.reason.need = qv.need;
    v.reason.have = qv.have;
    // The words only for an owner that reads them, once per (queue, shape).
    if (c_.snap.record_waiting) v.detail = admission_->Detail(a, leaf);
  }
  out_.waiting.push_back(std::move(v));
  return false;
}

}  // namespace hangar::sched
