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
      cfg_(s.config_),
      placer_(s.placer_),
      order_(s.order_),
      snap_(snap),
      now_(now),
      tree_(snap.queues),
      work_(s.CopyOfUsage(*snap.usage)),
      topo_(work_.topology()),
      opts_{s.scorer_.get(), snap.profile, nullptr, snap.random_seed},
      windows_(snap.windows, static_cast<uint32_t>(topo_.nodes().size()), now) {
  reserved_nodes_.assign(topo_.nodes().size(), 0);
  preempted_.assign(snap.running.size(), 0);
  if (tree_) {
    ChargeRunning();
    SortIntoQueues();
  }
  // Under Gittins preemption a full cluster is the common case in overload, with thousands
  // waiting: once no GPU is free and no job left in the queue outranks a running one, the
  // rest of the queue cannot start, so it is not examined.
  if (cfg_.preemption.mode == PreemptionMode::kGittins) {
    for (const RunningJob& r : snap.running) {
      if (r.preemptible) top_rank_ = std::max(top_rank_, r.rank);
    }
    least_rank_from_.assign(order_.size() + 1, INT64_MAX);
    for (size_t i = order_.size(); i-- > 0;) {
      least_rank_from_[i] = std::min(least_rank_from_[i + 1], snap.pending[order_[i]].rank);
    }
  }
  if (cfg_.preemption.mode == PreemptionMode::kGittins || tree_) gpus_exhausted_ = NoGpuLeft(work_);
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
