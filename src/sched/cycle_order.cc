// Job order: the policy's order, fair share across queues, and where the cycle stops. A stage of
// Scheduler::Run (cycle.h).
#include "sched/cycle.h"

namespace hangar::sched {

// Job order with queues: jobs queue by queue, each queue's in the policy's order.
void Scheduler::Run::SortIntoQueues() {
  share_.assign(tree_->nodes().size() + 1, {0, 0});
  stale_.assign(tree_->nodes().size() + 1, 1);
  share_.back() = {1e300, 1e300};  // jobs without a valid queue go last
  stale_.back() = 0;
  lists_.resize(tree_->nodes().size() + 1);
  cursor_.assign(lists_.size(), 0);
  for (uint32_t idx : order_) {
    const uint32_t q = snap_.pending[idx].queue;
    lists_[ValidLeaf(tree_, q) ? q : lists_.size() - 1].push_back(idx);
  }
}

void Scheduler::Run::FairShareKey(uint32_t q) {
  if (!stale_[q]) return;
  stale_[q] = 0;
  const std::vector<double>* h = q < snap_.queue_history.size() && !snap_.queue_history[q].empty()
                                     ? &snap_.queue_history[q]
                                     : nullptr;
  using Counting = queue::QuotaLedger::Counting;
  share_[q] = {ledger_->Share(static_cast<int>(q), h, Counting::kBeyondGuarantee),
               ledger_->Share(static_cast<int>(q))};
}

uint32_t Scheduler::Run::NextByShare() {
  size_t best = lists_.size();
  for (size_t q = 0; q < lists_.size(); ++q) {
    if (cursor_[q] >= lists_[q].size()) continue;
    FairShareKey(static_cast<uint32_t>(q));
    if (best == lists_.size() || share_[q] < share_[best]) best = q;
  }
  return lists_[best][cursor_[best]++];
}

bool Scheduler::Run::StopsBeforeSlow(uint32_t pos, bool capped) {
  const bool none_can_preempt = (cfg_.preemption.mode == PreemptionMode::kNone ||
                                 (cfg_.preemption.mode == PreemptionMode::kGittins &&
                                  least_rank_from_[tree_ ? 0 : pos] >= top_rank_)) &&
                                !reclaim_possible_;
  if (!capped && !(gpus_exhausted_ && snap_.cpu_only_pending == 0 && none_can_preempt))
    return false;
  StopBefore(pos);
  return true;
}

// Names the jobs the cycle stops before, from position `pos` of the order on.
void Scheduler::Run::StopBefore(uint32_t pos) {
  out_.not_examined = {Rule::kNotNowNotExamined};
  if (!tree_) {
    if (!snap_.record_waiting) return;  // nobody reads them
    out_.unexamined.reserve(order_.size() - pos);
    for (; pos < order_.size(); ++pos) out_.unexamined.push_back(snap_.pending[order_[pos]].id);
    return;
  }
  // With queues, the first job left of each queue still hears whether its queue refuses it now
  // (owners show that reason for a queue's head): a ledger check, no placement.
  for (size_t q = 0; q < lists_.size(); ++q) {
    for (size_t k = cursor_[q]; k < lists_[q].size(); ++k) {
      const uint32_t idx = lists_[q][k];
      const PendingJob& job = snap_.pending[idx];
      if (k == cursor_[q] && ValidLeaf(tree_, job.queue)) {
        const size_t before = out_.waiting.size();
        Kind quota = Kind::kWithin;
        if (!Admit(job, idx, static_cast<int>(job.queue), &quota) &&
            out_.waiting.back().reason.rule == Rule::kNotNowQuota) {
          continue;
        }
        out_.waiting.resize(before);  // a never-reason waits for the cycle that examines the job
      }
      if (snap_.record_waiting) out_.unexamined.push_back(job.id);
    }
  }
}

}  // namespace hangar::sched
