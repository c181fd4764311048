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
    for (const auto& info : s_.running_info_) {
      const auto& tasks = s_.running_slots_[info.job]->assignment.tasks;
      if (std::any_of(tasks.begin(), tasks.end(),
                      [&](const cluster::TaskPlacement& t) { return t.node == node; })) {
        out.push_back(info.job);
      }
    }
    std::sort(out.begin(), out.end());
    return out;
  }

  const cluster::GangAssignment* AssignmentOf(size_t j) const override {
    return j < s_.running_slots_.size() && s_.running_slots_[j] ? &s_.running_slots_[j]->assignment
                                                                : nullptr;
  }
  Time RunStart(size_t j) const override { return s_.running_slots_[j]->start; }
  Time RunEnd(size_t j) const override { return s_.running_slots_[j]->end; }

  void SetNodeCondition(uint32_t node, const cluster::NodeCondition& c) override {
    s_.usage_.SetNodeCondition(node, c);
  }

  void Requeue(Time now, size_t j, Duration remaining, bool to_back) override {
    s_.Release(now, j);
    s_.remaining_[j] = remaining;
    s_.epoch_[j]++;
    if (to_back) {
      // A new submission: the queue policies order by submit time, then by `seq`.
      s_.jobs_[j].submit = now;
      s_.order_[j] = *std::max_element(s_.order_.begin(), s_.order_.end()) + 1;
    }
    if (s_.jobs_[j].request->total_milli_gpu == 0) s_.cpu_only_pending_++;
    s_.Arrive(j);
  }

  Status Reassign(Time now, size_t j, const cluster::GangAssignment& a,
                  Duration remaining) override;

  void Submit(Time now, size_t j) override {
    if (!s_.held_back_[j]) return;
    s_.held_back_[j] = 0;
    s_.jobs_[j].submit = now;
    s_.order_[j] = *std::max_element(s_.order_.begin(), s_.order_.end()) + 1;
    if (s_.stopping_.count(j)) return;  // withdrawn while it stopped: it queues once stopped
    // Arrive counts a GPU-less job only on its first arrival.
    if (s_.jobs_[j].request->total_milli_gpu == 0 && s_.results_[j].preemptions > 0)
      s_.cpu_only_pending_++;
    s_.Arrive(j);
  }

  void Withdraw(Time now, size_t j) override {
    if (s_.held_back_[j]) return;
    if (const auto& run = s_.running_slots_[j]) {
      s_.remaining_[j] = run->end - std::max(now, run->ready);
      s_.Release(now, j);
      s_.epoch_[j]++;  // its end no longer holds
    } else if (s_.Waiting(j)) {
      s_.Unqueue(j);
    }  // else it is stopping after a preemption: Stopped frees its GPUs and queues it no more
    s_.held_back_[j] = 1;
  }

  bool HeldBack(size_t j) const override { return s_.held_back_[j] != 0; }

  void SetWindows(std::vector<sched::NodeWindow> windows) override {
    s_.windows_ = std::move(windows);
  }

 private:
  Simulator& s_;
};

Status SimulatorControl::Reassign(Time now, size_t j, const cluster::GangAssignment& a,
                                  Duration remaining) {
  Simulator::Running& run = *s_.running_slots_[j];
  s_.usage_.Release(run.assignment);
  if (Status st = s_.usage_.Allocate(a); !st.ok()) {
    (void)s_.usage_.Allocate(run.assignment);
    return Status::FailedPrecondition("job '" + s_.jobs_[j].name +
                                      "' cannot move onto its new nodes: " + st.message());
  }
  // The run so far is service received, as at a release.
  const Time served_from = std::min(now, run.ready);
  s_.attained_[j] += run.milli * (now - served_from) / 1000;
  s_.ran_[j] += now - served_from;
  if (s_.config_.queues) s_.ChargeQueue(j, run.charge, Simulator::Charging::kRemove);
  const int64_t milli = a.TotalMilliGpu(*s_.topology_);
  s_.allocated_milli_ += milli - run.milli;
  run.assignment = a;
  run.milli = milli;
  run.start = run.ready = now;
  run.end = remaining == kNever ? kNever : now + remaining;
  if (s_.config_.queues) {
    run.charge = s_.config_.queues->Charge(*s_.jobs_[j].request, &run.assignment, *s_.topology_);
    s_.ChargeQueue(j, run.charge, Simulator::Charging::kAdd);
  }
  s_.epoch_[j]++;  // its old end no longer holds
  if (run.end != kNever) s_.completions_.push({run.end, j, s_.epoch_[j]});
  const size_t pos = s_.running_pos_[j];
  sched::RunningJob& r = s_.running_jobs_[pos];
  r.start = now;
  r.last_checkpoint = now;
  r.attained_service = s_.attained_[j];
  r.expected_end = s_.jobs_[j].time_limit > 0 ? run.end : kNever;
  Simulator::RunningInfo& info = s_.running_info_[pos];
  info.milli = milli;
  info.attained = s_.attained_[j];
  info.ran = s_.ran_[j];
  return Status::Ok();
}

void Simulator::Unqueue(size_t j) {
  for (size_t i = 0; i < pending_.size(); ++i) {
    if (pending_[i].id != jobs_[j].id) continue;
    pending_.erase(pending_.begin() + static_cast<ptrdiff_t>(i));
    pending_keys_.erase(pending_keys_.begin() + static_cast<ptrdiff_t>(i));
    if (jobs_[j].request->total_milli_gpu == 0) cpu_only_pending_--;
    break;
  }
  // What waited for its victims' GPUs on its behalf goes back; the victims still stop.
  planned_.Forget(j, usage_);
  awaiting_.erase(j);
  verdicts_.erase(j);
  if (staging_) staging_->Unpin(PrestageOwner(j));
}

void Simulator::Disrupt(Time now) {
  SimulatorControl control(*this);
  disruptor_->Act(now, control);
}

}  // namespace hangar::sim
