#include "sched/scheduler.h"

#include <unordered_map>

#include "sched/backfill.h"

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

// What the cycle knows so far: the reservation, and the request shapes that already failed.
struct Scheduler::CycleState {
  bool reserved = false;
  Reservation reservation;
  std::vector<uint8_t> reserved_nodes;
  std::unordered_map<uint64_t, Reason> failed;  // (fingerprint, may use reserved nodes) -> why
  std::unordered_map<uint64_t, Reason> never;   // fingerprint -> never-reason or kNone
  JobId first_blocked = 0;
  bool blocked = false;
  std::vector<uint8_t> preempted;  // per running job: already a victim this cycle
  int victims = 0;
  int64_t top_rank = 0;  // kGittins: the highest rank among preemptible running jobs
};

namespace {

// What makes two jobs of one shape differ for preemption: their rank.
int64_t PreemptionRank(const PreemptionConfig& cfg, const PendingJob& job) {
  switch (cfg.mode) {
    case PreemptionMode::kNone: return 0;
    case PreemptionMode::kPriority: return job.priority * 2 + (job.tier == job::Tier::kGuaranteed);
    case PreemptionMode::kLas: return ServiceLevel(cfg.las_thresholds, job.attained_service);
    // The "gittins" queue is in rank order and a higher rank outranks fewer victims, so a shape
    // that failed for one job fails for every later one: the shape alone is the key.
    case PreemptionMode::kGittins:
      return 0;
  }
  return 0;
}

bool NoGpuLeft(const cluster::ClusterUsage& u) {
  const auto& all = u.domain(cluster::Level::kCluster, 0);
  if (all.free_milli > 0) return false;
  for (uint32_t n = 0; n < u.topology().nodes().size(); ++n) {
    if (u.node(n).max_mig_free_slices > 0 && u.node(n).condition.schedulable) return false;
  }
  return true;
}

}  // namespace

bool Scheduler::TryPreempt(const Snapshot& snap, const PendingJob& job, uint32_t idx, Time now,
                           cluster::ClusterUsage* work, CycleState* st, Decisions* out) {
  const PreemptionConfig& cfg = config_.preemption;
  if (cfg.mode == PreemptionMode::kNone) return false;
  if (cfg.max_victims_per_cycle > 0 && st->victims >= cfg.max_victims_per_cycle) return false;
  if (cfg.mode == PreemptionMode::kGittins && job.rank >= st->top_rank) return false;
  placement::PlaceOptions opts{scorer_.get(), snap.profile, nullptr, snap.random_seed};
  PreemptionPlan plan =
      PlanPreemption(cfg, *work, snap.running, st->preempted, job, placer_, opts, now);
  if (!plan.found) return false;
  Placement p;
  p.job = job.id;
  p.pending_index = idx;
  p.assignment = std::move(plan.placement.assignment);
  p.locality = plan.placement.locality;
  for (size_t v : plan.victims) {
    const RunningJob& victim = snap.running[v];
    st->preempted[v] = 1;
    st->victims++;
    p.preempted.push_back(victim.id);
    Preemption pre;
    pre.victim = victim.id;
    pre.for_job = job.id;
    pre.lost_gpu_ms = victim.assignment->TotalMilliGpu(work->topology()) *
                      std::max<Time>(0, now - std::max(victim.start, victim.last_checkpoint)) / 1000;
    pre.why =
        cfg.mode == PreemptionMode::kGittins
            ? "job " + std::to_string(job.id) +
                  " is expected to need less GPU time per completion (rank " +
                  std::to_string(job.rank / 1000) + " vs " + std::to_string(victim.rank / 1000) +
                  " GPU-s)"
        : cfg.mode == PreemptionMode::kLas
            ? "job " + std::to_string(job.id) + " has received less service (level " +
                  std::to_string(ServiceLevel(cfg.las_thresholds, job.attained_service)) + " vs " +
                  std::to_string(ServiceLevel(cfg.las_thresholds, victim.attained_service)) + ")"
            : "job " + std::to_string(job.id) + " (priority " + std::to_string(job.priority) +
                  ") outranks it (priority " + std::to_string(victim.priority) + ")";
    out->preemptions.push_back(std::move(pre));
  }
  out->placements.push_back(std::move(p));
  return true;
}

Decisions Scheduler::Cycle(const Snapshot& snap, Time now) {
  Decisions out;
  // 1. Order the queue.
  if (snap.pending_presorted) {
    order_.resize(snap.pending.size());
    for (uint32_t i = 0; i < order_.size(); ++i) order_[i] = i;
  } else {
    queue::OrderJobs(*queue_policy_, snap.pending, &order_);
  }
  // 2. Plan on a private copy of the usage.
  cluster::ClusterUsage work = *snap.usage;
  CycleState st;
  st.reserved_nodes.assign(work.topology().nodes().size(), 0);
  st.preempted.assign(snap.running.size(), 0);
  placement::PlaceOptions opts{scorer_.get(), snap.profile, nullptr, snap.random_seed};
  bool gpus_exhausted = false;
  // Under Gittins preemption a full cluster is the common case in overload, with thousands
  // waiting: once no GPU is free and no job left in the queue outranks a running one, the
  // rest of the queue cannot start, so it is not examined.
  std::vector<int64_t> least_rank_from;  // least rank from each position in order_ on
  if (config_.preemption.mode == PreemptionMode::kGittins) {
    for (const RunningJob& r : snap.running) {
      if (r.preemptible) st.top_rank = std::max(st.top_rank, r.rank);
    }
    least_rank_from.assign(order_.size() + 1, INT64_MAX);
    for (size_t i = order_.size(); i-- > 0;) {
      least_rank_from[i] = std::min(least_rank_from[i + 1], snap.pending[order_[i]].rank);
    }
    gpus_exhausted = NoGpuLeft(work);
  }

  // 3. Each job in order: place it whole, or say why not.
  for (uint32_t pos = 0; pos < order_.size(); ++pos) {
    const uint32_t idx = order_[pos];
    const PendingJob& job = snap.pending[idx];
    const GangRequest& req = *job.request;
    if (config_.max_placements > 0 && out.placements.size() >= static_cast<size_t>(config_.max_placements)) {
      out.not_examined = {Rule::kNotNowNotExamined};
      break;
    }
    const bool none_can_preempt = config_.preemption.mode == PreemptionMode::kNone ||
                                  (config_.preemption.mode == PreemptionMode::kGittins &&
                                   least_rank_from[pos] >= st.top_rank);
    if (gpus_exhausted && snap.cpu_only_pending == 0 && none_can_preempt) {
      out.not_examined = {Rule::kNotNowNotExamined};
      break;
    }
    out.examined++;
    if (config_.strict_order && st.blocked) {
      Reason r;
      r.rule = Rule::kNotNowBlocked;
      r.other = st.first_blocked;
      out.waiting.push_back({job.id, idx, r});
      continue;
    }
    // EASY: a job may use the reserved nodes only if it surely ends before the reservation.
    const bool may_use_reserved =
        !st.reserved || (job.time_limit > 0 && st.reservation.start != kNever &&
                         now + job.time_limit <= st.reservation.start);
    const uint64_t key = (req.fingerprint * 2 + (may_use_reserved ? 1 : 0)) * 31 +
                         static_cast<uint64_t>(PreemptionRank(config_.preemption, job));
    Reason why;
    auto seen = st.failed.find(key);
    if (seen != st.failed.end()) {
      why = seen->second;
    } else {
      opts.excluded = may_use_reserved ? nullptr : &st.reserved_nodes;
      placement::PlaceResult r = placer_.Place(work, req, opts);
      if (r.placed) {
        Placement p;
        p.job = job.id;
        p.pending_index = idx;
        p.assignment = std::move(r.assignment);
        p.locality = r.locality;
        p.backfilled = st.reserved;
        out.placements.push_back(std::move(p));
        gpus_exhausted = req.total_milli_gpu > 0 && NoGpuLeft(work);
        continue;
      }
      auto nv = st.never.find(req.fingerprint);
      if (nv == st.never.end()) {
        nv = st.never.emplace(req.fingerprint, placement::CheckNever(work.topology(), req)).first;
      }
      if (nv->second.rule == Rule::kNone && TryPreempt(snap, job, idx, now, &work, &st, &out)) {
        gpus_exhausted = gpus_exhausted && NoGpuLeft(work);  // a wide victim may leave GPUs free
        continue;
      }
      why = nv->second.rule != Rule::kNone ? nv->second : placement::ExplainNotNow(work, req, opts);
      if (why.rule == Rule::kNotNowReserved) {
        why.other = st.reservation.job;
        why.at = st.reservation.start;
      }
      st.failed.emplace(key, why);
    }
    if (!why.IsNever()) {
      if (!st.blocked) st.first_blocked = job.id;
      st.blocked = true;
      if (config_.backfill == BackfillMode::kEasy && !config_.strict_order && !st.reserved) {
        opts.excluded = nullptr;
        ShadowPlan plan = PlanReservation(work, snap.running, out.placements, snap.pending, req,
                                          placer_, opts, now);
        if (plan.found) {
          st.reserved = true;
          st.reservation = {job.id, plan.start, plan.nodes};
          for (uint32_t n : plan.nodes) st.reserved_nodes[n] = 1;
          out.reservations.push_back(st.reservation);
        }
      }
    }
    out.waiting.push_back({job.id, idx, why});
  }
  return out;
}

}  // namespace hangar::sched
