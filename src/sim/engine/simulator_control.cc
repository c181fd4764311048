// The SimControl through which a Disruptor (disruption.h) changes a running simulation: node
// conditions, a job requeued, a job moved to other nodes or held without progress. Part of
// Simulator; the failure model and the recovery policies live with the Disruptor.
#include <algorithm>

#include "sim/engine/simulator.h"

namespace hangar::sim {

class SimulatorControl : public SimControl {
 public:
  explicit SimulatorControl(Simulator& s) : s_(s) {}

  const cluster::ClusterUsage& usage() const override { return s_.usage_; }

  std::vector<size_t> JobsOn(uint32_t node) const override {
    std::vector<size_t> out;
    for (const auto& info : s_.running_.info()) {
      const auto& tasks = s_.running_.Find(info.job)->assignment.tasks;
      if (std::any_of(tasks.begin(), tasks.end(),
                      [&](const cluster::TaskPlacement& t) { return t.node == node; })) {
        out.push_back(info.job);
      }
    }
    std::sort(out.begin(), out.end());
    return out;
  }

  const cluster::GangAssignment* AssignmentOf(size_t j) const override {
    const Running* run = s_.running_.Find(j);
    return run ? &run->assignment : nullptr;
  }
  Time RunStart(size_t j) const override { return s_.running_.Find(j)->start; }
  Time RunEnd(size_t j) const override { return s_.running_.Find(j)->end; }

  void SetNodeCondition(uint32_t node, const cluster::NodeCondition& c) override {
    s_.usage_.SetNodeCondition(node, c);
  }

  void Requeue(Time now, size_t j, Duration remaining, bool to_back) override {
    s_.Release(now, j);
    JobProgress& progress = s_.jobs_.at(j);
    progress.remaining = remaining;
    progress.epoch++;
    if (to_back) {
      // A new submission: the queue policies order by submit time, then by `seq`.
      s_.jobs_.spec(j).submit = now;
      progress.order = s_.jobs_.NextOrder();
    }
    if (s_.jobs_.spec(j).request->total_milli_gpu == 0) s_.pending_.CountCpuOnly(+1);
    s_.Arrive(j);
  }

  Status Reassign(Time now, size_t j, const cluster::GangAssignment& a,
                  Duration remaining) override;

  void Submit(Time now, size_t j) override {
    JobProgress& progress = s_.jobs_.at(j);
    if (!progress.held_back) return;
    progress.held_back = false;
    s_.jobs_.spec(j).submit = now;
    progress.order = s_.jobs_.NextOrder();
    if (s_.grace_.Stopping(j)) return;  // withdrawn while it stopped: it queues once stopped
    // Arrive counts a GPU-less job only on its first arrival.
    if (s_.jobs_.spec(j).request->total_milli_gpu == 0 && s_.jobs_.result(j).preemptions > 0)
      s_.pending_.CountCpuOnly(+1);
    s_.Arrive(j);
  }

  void Withdraw(Time now, size_t j) override {
    JobProgress& progress = s_.jobs_.at(j);
    if (progress.held_back) return;
    if (const Running* run = s_.running_.Find(j)) {
      progress.remaining = run->end - std::max(now, run->ready);
      s_.Release(now, j);
      progress.epoch++;  // its end no longer holds
    } else if (s_.Waiting(j)) {
      s_.Unqueue(j);
    }  // else it is stopping after a preemption: Stopped frees its GPUs and queues it no more
    progress.held_back = true;
  }

  bool HeldBack(size_t j) const override { return s_.jobs_.at(j).held_back; }

  void SetWindows(std::vector<sched::NodeWindow> windows) override {
    s_.windows_ = std::move(windows);
  }

 private:
  Simulator& s_;
};

Status SimulatorControl::Reassign(Time now, size_t j, const cluster::GangAssignment& a,
                                  Duration remaining) {
  Running& run = *s_.running_.Find(j);
  const SimJob& job = s_.jobs_.spec(j);
  s_.usage_.Release(run.assignment);
  if (Status st = s_.usage_.Allocate(a); !st.ok()) {
    (void)s_.usage_.Allocate(run.assignment);
    return Status::FailedPrecondition("job '" + job.name +
                                      "' cannot move onto its new nodes: " + st.message());
  }
  // The run so far is service received, as at a release.
  JobProgress& progress = s_.jobs_.at(j);
  const Time served_from = std::min(now, run.ready);
  progress.attained += run.milli * (now - served_from) / 1000;
  progress.ran += now - served_from;
  if (s_.config_.queues) s_.accounts_.Charge(job.queue, run.charge, Accounts::Charging::kRemove);
  const int64_t milli = a.TotalMilliGpu(*s_.topology_);
  s_.accounts_.Free(run.milli);
  s_.accounts_.Allocate(milli);
  run.assignment = a;
  run.milli = milli;
  run.start = run.ready = now;
  run.end = remaining == kNever ? kNever : now + remaining;
  if (s_.config_.queues) {
    run.charge = s_.config_.queues->Charge(*job.request, &run.assignment, *s_.topology_);
    s_.accounts_.Charge(job.queue, run.charge, Accounts::Charging::kAdd);
  }
  progress.epoch++;  // its old end no longer holds
  if (run.end != kNever) s_.completions_.push({run.end, j, progress.epoch});
  const size_t pos = s_.running_.PositionOf(j);
  sched::RunningJob& r = s_.running_.seen()[pos];
  r.start = now;
  r.last_checkpoint = now;
  r.attained_service = progress.attained;
  r.expected_end = job.time_limit > 0 ? run.end : kNever;
  RunningInfo& info = s_.running_.info()[pos];
  info.milli = milli;
  info.attained = progress.attained;
  info.ran = progress.ran;
  return Status::Ok();
}

void Simulator::Unqueue(size_t j) {
  if (const size_t pos = pending_.Find(jobs_.spec(j).id); pos != pending_.size()) {
    pending_.Erase(pos);
    if (jobs_.spec(j).request->total_milli_gpu == 0) pending_.CountCpuOnly(-1);
  }
  // What waited for its victims' GPUs on its behalf goes back; the victims still stop.
  planned_.Forget(j, usage_);
  grace_.StopAwaiting(j);
  verdicts_.erase(j);
  if (staging_) staging_->Unpin(PrestageOwner(j));
}

void Simulator::Disrupt(Time now) {
  SimulatorControl control(*this);
  disruptor_->Act(now, control);
}

}  // namespace hangar::sim
