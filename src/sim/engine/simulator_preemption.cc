// Preemption in the lean engine: victims signalled, their grace, the preemptors (and the jobs
// their cycle placed on the victims' GPUs) started where they were placed once the victims have
// stopped -- as the controller does (ClusterState::StartPlanned). Part of Simulator.
#include <algorithm>

#include "sim/engine/simulator.h"

namespace hangar::sim {

void Simulator::Preempt(Time now, const sched::Preemption& p, std::vector<size_t>* requeue) {
  auto it = index_of_.find(p.victim);
  if (it == index_of_.end() || !running_slots_[it->second]) return;
  const size_t j = it->second;
  const Duration left = running_slots_[j]->end - std::max(now, running_slots_[j]->ready);
  std::unique_ptr<Running> held;
  if (config_.preemption_grace > 0) held = std::make_unique<Running>(*running_slots_[j]);
  Release(now, j);
  results_[j].preemptions++;
  remaining_[j] = left + config_.restore_cost;
  epoch_[j]++;
  if (observer_.on_preempt) observer_.on_preempt(now, jobs_[j], p);
  if (held) {
    // It stops after the grace, holding its GPUs until then (Release gave them back: take
    // them again), and queues again only then.
    (void)usage_.Allocate(held->assignment);
    allocated_milli_ += held->milli;
    if (config_.queues) ChargeQueue(j, held->charge, Charging::kAdd);
    stops_.push({now + config_.preemption_grace, j, epoch_[j]});
    stopping_[j] = std::move(held);
    return;
  }
  if (jobs_[j].request->total_milli_gpu == 0) cpu_only_pending_++;
  requeue->push_back(j);
}

void Simulator::Stopped(size_t j) {
  auto it = stopping_.find(j);
  if (it == stopping_.end()) return;
  Running& run = *it->second;
  // Its GPUs join what is held for the job it was preempted for, while that one still waits.
  auto f = stopping_for_.find(j);
  if (f != stopping_for_.end() && Waiting(f->second) && awaiting_.count(f->second)) {
    planned_.Hold(f->second, std::move(run.assignment));
  } else {
    usage_.Release(run.assignment);
  }
  allocated_milli_ -= run.milli;
  if (config_.queues) ChargeQueue(j, run.charge, Charging::kRemove);
  stopping_.erase(it);
  std::vector<size_t> waited;  // the jobs that waited for it
  if (f != stopping_for_.end()) {
    waited.push_back(f->second);
    stopping_for_.erase(f);
  }
  if (auto w = also_waiting_.find(j); w != also_waiting_.end()) {
    waited.insert(waited.end(), w->second.begin(), w->second.end());
    also_waiting_.erase(w);
  }
  for (size_t k : waited) {
    auto a = awaiting_.find(k);
    if (a == awaiting_.end() || --a->second > 0) continue;
    awaiting_.erase(a);
    for (auto& p : pending_) {
      if (p.id == jobs_[k].id) p.may_preempt = true;
    }
  }
  if (held_back_[j]) return;  // withdrawn while it stopped
  if (jobs_[j].request->total_milli_gpu == 0) cpu_only_pending_++;
  Arrive(j);
}

// A preemptor whose victims have all stopped starts where the cycle that preempted for it placed
// it, and so does a job that cycle placed on GPUs its victims still held; should that be
// impossible now, it waits for this cycle to place it afresh. In the order they were placed.
void Simulator::StartPlanned(Time now) {
  using Due = sched::owner::PlannedStarts::Due;
  std::vector<size_t> started;
  planned_.StartDue(
      usage_,
      [&](size_t j) {
        if (!Waiting(j)) return Due::kDrop;
        return awaiting_.count(j) ? Due::kWait : Due::kStart;
      },
      [&](size_t, sched::Placement& p) {
        size_t pos = 0;
        while (pos < pending_.size() && pending_[pos].id != p.job) ++pos;
        if (pos == pending_.size()) return;
        p.pending_index = static_cast<uint32_t>(pos);
        started.clear();
        if (!Start(now, p, &started)) return;
        pending_.erase(pending_.begin() + static_cast<ptrdiff_t>(pos));
        pending_keys_.erase(pending_keys_.begin() + static_cast<ptrdiff_t>(pos));
      });
}

// What is held for a job that is no longer waiting for victims goes back.
void Simulator::ReleaseHolds() {
  planned_.ReleaseHolds(usage_, [&](size_t j) { return Waiting(j) && awaiting_.count(j) > 0; });
}

}  // namespace hangar::sim
