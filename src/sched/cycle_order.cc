// Job order: fair share across queues (FairShareOrder), and where the cycle stops. A stage of one
// cycle (cycle.h).
#include "sched/cycle.h"

namespace hangar::sched {

namespace cycle {

// Jobs queue by queue, each queue's in the policy's order.
FairShareOrder::FairShareOrder(const Context& c, const queue::QuotaLedger& ledger)
    : c_(c), ledger_(ledger) {
  const size_t queues = c.tree->nodes().size();
  share_.assign(queues, {0, 0});
  stale_.assign(queues, 1);
  share_.push_back({1e300, 1e300});  // jobs without a valid queue go last
  stale_.push_back(0);
  lists_.resize(queues + 1);
  cursor_.assign(queues + 1, 0);
  for (uint32_t idx : c.order) {
    const uint32_t q = c.snap.pending[idx].queue;
    lists_[ValidLeaf(c.tree, q) ? q : lists_.size() - 1].push_back(idx);
  }
}

void FairShareOrder::Key(uint32_t q) {
  if (!stale_[q]) return;
  stale_[q] = 0;
  const auto& history = c_.snap.queue_history;
  const std::vector<double>* h = q < history.size() && !history[q].empty() ? &history[q] : nullptr;
  using Counting = queue::QuotaLedger::Counting;
  share_[q] = {ledger_.Share(static_cast<int>(q), h, Counting::kBeyondGuarantee),
               ledger_.Share(static_cast<int>(q))};
}

uint32_t FairShareOrder::Next() {
  size_t best = lists_.size();
  for (size_t q = 0; q < lists_.size(); ++q) {
    if (cursor_[q] >= lists_[q].size()) continue;
    Key(static_cast<uint32_t>(q));
    if (best == lists_.size() || share_[q] < share_[best]) best = q;
  }
  return lists_[best][cursor_[best]++];
}

}  // namespace cycle

bool Scheduler::Run::StopsBeforeSlow(uint32_t pos, bool capped) {
  const bool none_can_preempt =
      preemptor_.NoneFrom(by_share_ ? 0 : pos) && !(admission_ && admission_->reclaim_possible());
  if (!capped && !(gpus_exhausted_ && c_.snap.cpu_only_pending == 0 && none_can_preempt))
    return false;
  StopBefore(pos);
  return true;
}

// Names the jobs the cycle stops before, from position `pos` of the order on.
void Scheduler::Run::StopBefore(uint32_t pos) {
  out_.not_examined = {Rule::kNotNowNotExamined};
  const Snapshot& snap = c_.snap;
  if (!by_share_) {
    if (!snap.record_waiting) return;  // nobody reads them
    out_.unexamined.reserve(c_.order.size() - pos);
    for (; pos < c_.order.size(); ++pos) out_.unexamined.push_back(snap.pending[c_.order[pos]].id);
    return;
  }
  // With queues, the first job left of each queue still hears whether its queue refuses it now
  // (owners show that reason for a queue's head): a ledger check, no placement.
  by_share_->ForEachLeft([&](uint32_t idx, bool head) {
    const PendingJob& job = snap.pending[idx];
    if (head && ValidLeaf(c_.tree, job.queue)) {
      const size_t before = out_.waiting.size();
      Kind quota = Kind::kWithin;
      if (!Admit(job, idx, static_cast<int>(job.queue), &quota) &&
          out_.waiting.back().reason.rule == Rule::kNotNowQuota) {
        return;
      }
      out_.waiting.resize(before);  // a never-reason waits for the cycle that examines the job
    }
    if (snap.record_waiting) out_.unexamined.push_back(job.id);
  });
}

}  // namespace hangar::sched
