#include "sched/scheduler.h"

#include <unordered_map>

#include "sched/backfill.h"

namespace hangar::sched {

StatusOr<std::unique_ptr<Scheduler>> Scheduler::Create(const SchedulerConfig& config) {
  HANGAR_ASSIGN_OR_RETURN(auto q, queue::MakeQueuePolicy(config.queue_policy));
  HANGAR_ASSIGN_OR_RETURN(auto s, placement::MakeScorer(config.placement_policy));
  return std::unique_ptr<Scheduler>(new Scheduler(config, std::move(q), std::move(s)));
}

Scheduler::Scheduler(SchedulerConfig config, std::unique_ptr<queue::QueuePolicy> q,
                     std::unique_ptr<placement::NodeScorer> s)
    : config_(std::move(config)), queue_policy_(std::move(q)), scorer_(std::move(s)) {}

namespace {

// What the cycle knows so far: the reservation, and the request shapes that already failed.
struct CycleState {
  bool reserved = false;
  Reservation reservation;
  std::vector<uint8_t> reserved_nodes;
  std::unordered_map<uint64_t, Reason> failed;  // (fingerprint, may use reserved nodes) -> why
  std::unordered_map<uint64_t, Reason> never;   // fingerprint -> never-reason or kNone
  JobId first_blocked = 0;
  bool blocked = false;
};

bool NoGpuLeft(const cluster::ClusterUsage& u) {
  const auto& all = u.domain(cluster::Level::kCluster, 0);
  if (all.free_milli > 0) return false;
  for (uint32_t n = 0; n < u.topology().nodes().size(); ++n) {
    if (u.node(n).max_mig_free_slices > 0 && u.node(n).condition.schedulable) return false;
  }
  return true;
}

}  // namespace

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
  placement::PlaceOptions opts{scorer_.get(), snap.profile, nullptr, snap.random_seed};
  bool gpus_exhausted = false;

  // 3. Each job in order: place it whole, or say why not.
  for (uint32_t idx : order_) {
    const PendingJob& job = snap.pending[idx];
    const GangRequest& req = *job.request;
    if (config_.max_placements > 0 && out.placements.size() >= static_cast<size_t>(config_.max_placements)) {
      out.not_examined = {Rule::kNotNowNotExamined};
      break;
    }
    if (gpus_exhausted && snap.cpu_only_pending == 0) {
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
    const uint64_t key = req.fingerprint * 2 + (may_use_reserved ? 1 : 0);
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
