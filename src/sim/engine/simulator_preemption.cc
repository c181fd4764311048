// Preemption in the lean engine: victims signalled, their grace, the preemptors (and the jobs
// their cycle placed on the victims' GPUs) started where they were placed once the victims have
// stopped -- as the controller does (ClusterState::StartPlanned). Part of Simulator.
#include <algorithm>

#include "sim/engine/simulator.h"

namespace hangar::sim {

void Simulator::Preempt(Time now, const sched::Preemption& p, std::vector<size_t>* requeue) {
  const size_t j = jobs_.IndexOf(p.victim);
  const Running* run = j == SIZE_MAX ? nullptr : running_.Find(j);
  if (!run) return;
  const Duration left = run->end - std::max(now, run->ready);
  std::unique_ptr<Running> held;
  if (config_.preemption_grace > 0) held = std::make_unique<Running>(*run);
  Release(now, j);
  jobs_.result(j).preemptions++;
  JobProgress& progress = jobs_.at(j);
  progress.remaining = left + config_.restore_cost;
  progress.epoch++;
  const SimJob& job = jobs_.spec(j);
  if (observer_.on_preempt) observer_.on_preempt(now, job, p);
  if (held) {
    // It stops after the grace, holding its GPUs until then (Release gave them back: take
    // them again), and queues again only then.
    (void)usage_.Allocate(held->assignment);
    accounts_.Allocate(held->milli);
    if (config_.queues) accounts_.Charge(job.queue, held->charge, Accounts::Charging::kAdd);
    grace_.Begin(j, std::move(held), now + config_.preemption_grace, progress.epoch);
    return;
  }
  if (job.request->total_milli_gpu == 0) pending_.CountCpuOnly(+1);
  requeue->push_back(j);
}

void Simulator::Stopped(size_t j) {
  if (!grace_.Stopping(j)) return;
  // Its GPUs join what is held for the job it was preempted for, while that one still waits.
  const size_t f = grace_.ForJob(j);
  const bool join = f != SIZE_MAX && Waiting(f) && grace_.Awaits(f);
  std::vector<size_t> settled;  // the jobs that now wait for no victim
  std::unique_ptr<Running> run = grace_.Stop(j, &settled);
  if (join) {
    planned_.Hold(f, std::move(run->assignment));
  } else {
    usage_.Release(run->assignment);
  }
  accounts_.Free(run->milli);
  const SimJob& job = jobs_.spec(j);
  if (config_.queues) accounts_.Charge(job.queue, run->charge, Accounts::Charging::kRemove);
  for (size_t k : settled) {
    for (auto& p : pending_.jobs()) {
      if (p.id == jobs_.spec(k).id) p.may_preempt = true;
    }
  }
  if (jobs_.at(j).held_back) return;  // withdrawn while it stopped
  if (job.request->total_milli_gpu == 0) pending_.CountCpuOnly(+1);
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
        return grace_.Awaits(j) ? Due::kWait : Due::kStart;
      },
      [&](size_t, sched::Placement& p) {
        const size_t pos = pending_.Find(p.job);
        if (pos == pending_.size()) return;
        p.pending_index = static_cast<uint32_t>(pos);
        started.clear();
        if (!Start(now, p, &started)) return;
        pending_.Erase(pos);
      });
}

// What is held for a job that is no longer waiting for victims goes back.
void Simulator::ReleaseHolds() {
  planned_.ReleaseHolds(usage_, [&](size_t j) { return Waiting(j) && grace_.Awaits(j); });
}

}  // namespace hangar::sim
