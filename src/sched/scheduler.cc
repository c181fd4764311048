#include "sched/scheduler.h"

#include "sched/cycle.h"

namespace hangar::sched {

StatusOr<std::unique_ptr<Scheduler>> Scheduler::Create(const SchedulerConfig& config) {
  queue::QueueParams params;
  params.las_thresholds = config.preemption.las_thresholds;
  HANGAR_ASSIGN_OR_RETURN(auto q, queue::MakeQueuePolicy(config.queue_policy, params));
  HANGAR_ASSIGN_OR_RETURN(auto s, placement::MakeScorer(config.placement_policy));
  return std::unique_ptr<Scheduler>(new Scheduler(config, std::move(q), std::move(s)));
}

Scheduler::Scheduler(SchedulerConfig config, std::unique_ptr<queue::QueuePolicy> q,
                     std::unique_ptr<placement::NodeScorer> s)
    : config_(std::move(config)), queue_policy_(std::move(q)), scorer_(std::move(s)) {}

const Reason& Scheduler::NeverReason(const cluster::Topology& topology,
                                     const GangRequest& request) {
  if (never_topology_ != &topology) {
    never_.clear();
    never_topology_ = &topology;
  }
  auto [first, last] = never_.equal_range(request.fingerprint);
  for (auto it = first; it != last; ++it) {
    if (SamePlacement(it->second.request, request)) return it->second.reason;
  }
  return never_
      .emplace(request.fingerprint, NeverEntry{request, placement::CheckNever(topology, request)})
      ->second.reason;
}

cluster::ClusterUsage& Scheduler::CopyOfUsage(const cluster::ClusterUsage& usage) {
  if (work_) {
    *work_ = usage;
  } else {
    work_.emplace(usage);
  }
  return *work_;
}

Scheduler::Run::Run(Scheduler& s, const Snapshot& snap, Time now)
    : scheduler_(s),
      c_([&]() -> cycle::Context {
        cluster::ClusterUsage& work = s.CopyOfUsage(*snap.usage);
        return {s.config_, snap, now, s.order_, snap.queues, work, work.topology(), s.placer_};
      }()),
      opts_{s.scorer_.get(), snap.profile, nullptr, snap.random_seed},
      windows_(snap.windows, static_cast<uint32_t>(c_.topo.nodes().size()), now),
      admission_(c_.tree ? std::optional<cycle::QuotaAdmission>(std::in_place, c_) : std::nullopt),
      by_share_(c_.tree
                    ? std::optional<cycle::FairShareOrder>(std::in_place, c_, admission_->ledger())
                    : std::nullopt),
      backfill_(c_),
      preemptor_(c_, admission_ ? &*admission_ : nullptr, by_share_ ? &*by_share_ : nullptr) {
  if (c_.cfg.preemption.mode == PreemptionMode::kGittins || c_.tree)
    gpus_exhausted_ = NoGpuLeft(c_.work);
}

Decisions Scheduler::Cycle(const Snapshot& snap, Time now) {
  // 1. Job order: the policy's, or the owner's when it keeps the queue sorted.
  if (snap.pending_presorted) {
    order_.resize(snap.pending.size());
    for (uint32_t i = 0; i < order_.size(); ++i) order_[i] = i;
  } else {
    queue::OrderJobs(*queue_policy_, snap.pending, &order_);
  }
  // 2. Plan on a private copy of the usage, drawing from this cycle's own seed.
  placer_.BeginCycle(snap.random_seed);
  Run run(*this, snap, now);
  // 3. Each job in order (fair share across queues): admission, placement, preemption, backfill.
  for (uint32_t pos = 0; pos < order_.size() && !run.StopsBefore(pos); ++pos)
    run.Examine(run.Next(pos));
  // 4. MIG GPUs re-cut for the MIG jobs that found no instance of their shape.
  run.PlanReshapes();
  // 5. The owner commits the decisions, then acts.
  return run.Take();
}

}  // namespace hangar::sched
