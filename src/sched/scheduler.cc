#include "sched/scheduler.h"

#include <optional>
#include <unordered_map>

#include "sched/backfill.h"
#include "sched/queue/quota.h"

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

namespace {

// What makes two jobs get the same answer from placement and preemption within one cycle: the
// request's shape, whether it may use reserved nodes, its preemption rank and, with queues, its
// queue and quota standing. Compared field by field: an arithmetic mix of the fields let two
// jobs whose ranks differ by 31 share an answer across the reserved-nodes bit.
struct ShapeKey {
  uint64_t fingerprint = 0;
  int64_t preemption_rank = 0;
  int32_t leaf = -1;  // -1: no queues
  bool may_use_reserved = false;
  queue::QuotaLedger::Kind quota = queue::QuotaLedger::Kind::kWithin;
  job::Tier tier = job::Tier::kGuaranteed;
  bool operator==(const ShapeKey&) const = default;
};

struct ShapeKeyHash {
  size_t operator()(const ShapeKey& k) const {
    uint64_t h = k.fingerprint;
    for (uint64_t v : {static_cast<uint64_t>(k.preemption_rank), static_cast<uint64_t>(k.leaf),
                       static_cast<uint64_t>(k.may_use_reserved), static_cast<uint64_t>(k.quota),
                       static_cast<uint64_t>(k.tier)}) {
      h ^= v + 0x9E3779B97F4A7C15ull + (h << 6) + (h >> 2);
    }
    return static_cast<size_t>(h);
  }
};

}  // namespace

// What the cycle knows so far: the reservation, and the request shapes that already failed.
struct Scheduler::CycleState {
  bool reserved = false;
  Reservation reservation;
  std::vector<uint8_t> reserved_nodes;
  // Why a shape failed; cleared by a preemption, which frees what it failed for.
  std::unordered_map<ShapeKey, Reason, ShapeKeyHash> failed;
  std::unordered_map<uint64_t, Reason> never;   // fingerprint -> never-reason or kNone
  JobId first_blocked = 0;
  bool blocked = false;
  std::vector<uint8_t> preempted;  // per running job: already a victim this cycle
  int victims = 0;
  int64_t top_rank = 0;  // kGittins: the highest rank among preemptible running jobs
  // With queues: every queue's position, what each running job is charged, and the fair-share
  // keys (beyond-guarantee share, then whole share) per queue.
  std::optional<queue::QuotaLedger> ledger;
  // What each running job is charged: the owner's (RunningJob::charge) or computed into
  // charge_store (reserved up front, so the pointers stay valid); null: not charged.
  std::vector<const std::vector<int64_t>*> running_charge;
  std::vector<std::vector<int64_t>> charge_store;
  // A queue's key: its dominant share beyond its guarantee, counting usage as the larger of now
  // and its decayed history (so a queue whose job just ended is not refilled first, and a queue
  // that used little lately goes first); then its share now.
  std::vector<std::pair<double, double>> share;
  std::vector<uint8_t> stale;
  void Refresh(const Snapshot&, uint32_t q) { stale[q] = 1; }
  void Key(const Snapshot& snap, uint32_t q) {
    if (!stale[q]) return;
    stale[q] = 0;
    const std::vector<double>* h =
        q < snap.queue_history.size() && !snap.queue_history[q].empty() ? &snap.queue_history[q] : nullptr;
    share[q] = {ledger->Share(static_cast<int>(q), h, true), ledger->Share(static_cast<int>(q), nullptr, false)};
  }
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
    case PreemptionMode::kQuota:
      return 0;
  }
  return 0;
}

bool ValidLeaf(const queue::QueueTree* tree, uint32_t q) {
  return tree && q < tree->nodes().size() && tree->nodes()[q].leaf();
}

std::string GpuText(int64_t milli) {
  return milli % 1000 == 0 ? std::to_string(milli / 1000) : std::to_string(milli / 1000) + "." + std::to_string(milli % 1000 / 100);
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

bool Scheduler::TryPreempt(const Snapshot& snap, const PendingJob& job, uint32_t idx, Time now, int leaf,
                           bool within, cluster::ClusterUsage* work, CycleState* st, Decisions* out) {
  const PreemptionConfig& cfg = config_.preemption;
  const queue::QueueTree* tree = snap.queues;
  if (!job.may_preempt) return false;
  const bool reclaim = leaf >= 0 && within && cfg.reclaim_quota && job.tier == job::Tier::kGuaranteed;
  if (cfg.mode == PreemptionMode::kNone && !reclaim) return false;
  if (cfg.max_victims_per_cycle > 0 && st->victims >= cfg.max_victims_per_cycle) return false;
  if (!reclaim && cfg.mode == PreemptionMode::kGittins && job.rank >= st->top_rank) return false;
  placement::PlaceOptions opts{scorer_.get(), snap.profile, nullptr, snap.random_seed};
  // With queues the victims are chosen here: borrowers when reclaiming a guarantee (jobs of other
  // queues beyond their guarantee, opportunistic jobs), and otherwise only jobs the policy's
  // rule lets it outrank within its own queue (or opportunistic ones): a borrower never preempts
  // another queue's guaranteed work.
  std::vector<uint8_t> eligible;
  std::vector<uint8_t> reclaimed;  // victim taken as a borrower
  PreemptionConfig pcfg = cfg;
  if (tree) {
    eligible.assign(snap.running.size(), 0);
    reclaimed.assign(snap.running.size(), 0);
    for (size_t i = 0; i < snap.running.size(); ++i) {
      const RunningJob& r = snap.running[i];
      const int rq = ValidLeaf(tree, r.queue) ? static_cast<int>(r.queue) : -1;
      const bool opportunistic = r.tier == job::Tier::kOpportunistic;
      const std::vector<int64_t>* charge = st->running_charge[i];
      const bool borrower = opportunistic || (rq >= 0 && rq != leaf && charge && !charge->empty() &&
                                              st->ledger->Borrowed(rq, queue::kGpu) >= (*charge)[queue::kGpu] &&
                                              (*charge)[queue::kGpu] > 0);
      if (reclaim && borrower) {
        eligible[i] = reclaimed[i] = 1;
      } else if (cfg.mode != PreemptionMode::kNone && (rq == leaf || opportunistic) && Outranks(cfg, job, r, now)) {
        eligible[i] = 1;
      }
    }
    if (reclaim) pcfg.mode = PreemptionMode::kQuota;
  }
  PreemptionPlan plan = PlanPreemption(pcfg, *work, snap.running, st->preempted, job, placer_, opts, now,
                                       tree ? &eligible : nullptr);
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
    const std::string lost = "; of the jobs that may be preempted it loses the least work (" +
                             GpuText(pre.lost_gpu_ms / 3600) + " GPU-hours since its last checkpoint)";
    if (tree && reclaimed[v]) {
      const int rq = ValidLeaf(tree, victim.queue) ? static_cast<int>(victim.queue) : -1;
      pre.why = "job " + std::to_string(job.id) + " reclaims queue " + tree->nodes()[leaf].name + "'s guarantee: " +
                (victim.tier == job::Tier::kOpportunistic
                     ? std::string("this job is opportunistic")
                     : "queue " + tree->nodes()[rq].name + " runs " +
                           GpuText(st->ledger->Borrowed(rq, queue::kGpu)) + " GPUs beyond its guarantee") +
                lost;
    } else {
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
    }
    if (tree && st->running_charge[v] && !st->running_charge[v]->empty()) {
      st->ledger->Add(static_cast<int>(victim.queue), *st->running_charge[v], -1);
      st->Refresh(snap, victim.queue);
    }
    out->preemptions.push_back(std::move(pre));
  }
  out->placements.push_back(std::move(p));
  // The victims' release may let shapes that failed before fit now: forget those answers.
  st->failed.clear();
  return true;
}

Decisions Scheduler::Cycle(const Snapshot& snap, Time now) {
  Decisions out;
  placer_.BeginCycle(snap.random_seed);
  // 1. Order the queue.
  if (snap.pending_presorted) {
    order_.resize(snap.pending.size());
    for (uint32_t i = 0; i < order_.size(); ++i) order_[i] = i;
  } else {
    queue::OrderJobs(*queue_policy_, snap.pending, &order_);
  }
  // 2. Plan on a private copy of the usage.
  cluster::ClusterUsage work = *snap.usage;
  const cluster::Topology& topo = work.topology();
  CycleState st;
  st.reserved_nodes.assign(topo.nodes().size(), 0);
  st.preempted.assign(snap.running.size(), 0);
  placement::PlaceOptions opts{scorer_.get(), snap.profile, nullptr, snap.random_seed};
  bool gpus_exhausted = false;

  // With queues: charge what runs to its queue, and take jobs queue by queue in fair-share order
  // (lowest share beyond the guarantee first), each queue's jobs in the policy's order.
  const queue::QueueTree* tree = snap.queues;
  bool reclaim_possible = false;
  std::vector<std::vector<uint32_t>> lists;  // per tree node; one more for jobs without a valid queue
  std::vector<size_t> cursor;
  if (tree) {
    st.ledger.emplace(tree);
    st.running_charge.assign(snap.running.size(), nullptr);
    st.charge_store.reserve(snap.running.size());
    for (size_t i = 0; i < snap.running.size(); ++i) {
      const RunningJob& r = snap.running[i];
      if (!ValidLeaf(tree, r.queue) || !r.assignment) continue;
      if (r.charge) {
        st.running_charge[i] = r.charge;
      } else {
        st.charge_store.push_back(tree->Charge(*r.request, r.assignment, topo));
        st.running_charge[i] = &st.charge_store.back();
      }
      st.ledger->Add(static_cast<int>(r.queue), *st.running_charge[i]);
    }
    st.share.assign(tree->nodes().size() + 1, {0, 0});
    st.stale.assign(tree->nodes().size() + 1, 1);
    st.share.back() = {1e300, 1e300};
    st.stale.back() = 0;
    if (config_.preemption.reclaim_quota) {
      for (size_t i = 0; i < snap.running.size() && !reclaim_possible; ++i) {
        const RunningJob& r = snap.running[i];
        reclaim_possible = r.tier == job::Tier::kOpportunistic ||
                           (ValidLeaf(tree, r.queue) && st.ledger->Borrowed(static_cast<int>(r.queue), queue::kGpu) > 0);
      }
    }
    lists.resize(tree->nodes().size() + 1);
    cursor.assign(lists.size(), 0);
    for (uint32_t idx : order_) {
      const uint32_t q = snap.pending[idx].queue;
      lists[ValidLeaf(tree, q) ? q : lists.size() - 1].push_back(idx);
    }
  }
  auto next = [&](uint32_t pos) -> uint32_t {
    if (!tree) return order_[pos];
    size_t best = lists.size();
    for (size_t q = 0; q < lists.size(); ++q) {
      if (cursor[q] >= lists[q].size()) continue;
      st.Key(snap, static_cast<uint32_t>(q));
      if (best == lists.size() || st.share[q] < st.share[best]) best = q;
    }
    return lists[best][cursor[best]++];
  };

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
  } else if (tree) {
    gpus_exhausted = NoGpuLeft(work);
  }
  auto never_of = [&](const GangRequest& req) -> const Reason& {
    auto nv = st.never.find(req.fingerprint);
    if (nv == st.never.end()) nv = st.never.emplace(req.fingerprint, placement::CheckNever(topo, req)).first;
    return nv->second;
  };
  // Names the jobs the cycle stops before, from position `pos` of the order on.
  auto unexamined = [&](uint32_t pos) {
    if (!tree) {
      out.unexamined.reserve(order_.size() - pos);
      for (; pos < order_.size(); ++pos) out.unexamined.push_back(snap.pending[order_[pos]].id);
      return;
    }
    // With queues, the first job left of each queue still hears whether its queue refuses it
    // now (owners show that reason for a queue's head): a ledger check, no placement.
    for (size_t q = 0; q < lists.size(); ++q) {
      for (size_t k = cursor[q]; k < lists[q].size(); ++k) {
        const uint32_t idx = lists[q][k];
        const PendingJob& job = snap.pending[idx];
        if (k == cursor[q] && ValidLeaf(tree, job.queue)) {
          const int leaf = static_cast<int>(job.queue);
          const std::vector<int64_t> computed = job.charge ? std::vector<int64_t>{} : tree->Charge(*job.request, nullptr, topo);
          const queue::QuotaLedger::Verdict qv = st.ledger->Check(leaf, job.charge ? *job.charge : computed,
                                                                 job.tier == job::Tier::kGuaranteed);
          if (qv.kind == queue::QuotaLedger::Kind::kDenied && never_of(*job.request).rule == Rule::kNone) {
            Verdict v{job.id, idx, {}, st.ledger->Explain(qv, leaf)};
            v.reason.rule = Rule::kNotNowQuota;
            v.reason.need = qv.need;
            v.reason.have = qv.have;
            out.waiting.push_back(std::move(v));
            continue;
          }
        }
        out.unexamined.push_back(job.id);
      }
    }
  };

  // 3. Each job in order: place it whole, or say why not.
  for (uint32_t pos = 0; pos < order_.size(); ++pos) {
    if (config_.max_placements > 0 && out.placements.size() >= static_cast<size_t>(config_.max_placements)) {
      out.not_examined = {Rule::kNotNowNotExamined};
      unexamined(pos);
      break;
    }
    bool none_can_preempt = config_.preemption.mode == PreemptionMode::kNone ||
                            (config_.preemption.mode == PreemptionMode::kGittins &&
                             least_rank_from[tree ? 0 : pos] >= st.top_rank);
    none_can_preempt = none_can_preempt && !reclaim_possible;
    if (gpus_exhausted && snap.cpu_only_pending == 0 && none_can_preempt) {
      out.not_examined = {Rule::kNotNowNotExamined};
      unexamined(pos);
      break;
    }
    const uint32_t idx = next(pos);
    const PendingJob& job = snap.pending[idx];
    const GangRequest& req = *job.request;
    out.examined++;
    if (config_.strict_order && st.blocked) {
      Reason r;
      r.rule = Rule::kNotNowBlocked;
      r.other = st.first_blocked;
      out.waiting.push_back({job.id, idx, r, {}});
      continue;
    }
    // Quota first: a job its queue may not start now waits without holding anyone up.
    const int leaf = ValidLeaf(tree, job.queue) ? static_cast<int>(job.queue) : -1;
    queue::QuotaLedger::Kind quota = queue::QuotaLedger::Kind::kWithin;
    if (leaf >= 0) {
      std::vector<int64_t> computed;
      if (!job.charge) computed = tree->Charge(req, nullptr, topo);
      const queue::QuotaLedger::Verdict qv =
          st.ledger->Check(leaf, job.charge ? *job.charge : computed, job.tier == job::Tier::kGuaranteed);
      if (qv.kind == queue::QuotaLedger::Kind::kDenied) {
        const Reason& never = never_of(req);
        Verdict v{job.id, idx, never, {}};
        if (never.rule == Rule::kNone) {
          v.reason.rule = Rule::kNotNowQuota;
          v.reason.need = qv.need;
          v.reason.have = qv.have;
          v.detail = st.ledger->Explain(qv, leaf);
        }
        out.waiting.push_back(std::move(v));
        continue;
      }
      quota = qv.kind;
    }
    // EASY: a job may use the reserved nodes only if it surely ends before the reservation.
    const bool may_use_reserved =
        !st.reserved || (job.time_limit > 0 && st.reservation.start != kNever &&
                         now + job.time_limit <= st.reservation.start);
    const ShapeKey key{req.fingerprint, PreemptionRank(config_.preemption, job), leaf, may_use_reserved,
                       quota, job.tier};
    Reason why;
    auto seen = st.failed.find(key);
    if (seen != st.failed.end()) {
      why = seen->second;
    } else {
      opts.excluded = may_use_reserved ? nullptr : &st.reserved_nodes;
      placement::PlaceResult r = placer_.Place(work, req, opts);
      const size_t before = out.placements.size();
      bool placed = false;
      if (r.placed) {
        Placement p;
        p.job = job.id;
        p.pending_index = idx;
        p.assignment = std::move(r.assignment);
        p.locality = r.locality;
        p.backfilled = st.reserved;
        out.placements.push_back(std::move(p));
        placed = true;
      } else if (never_of(req).rule == Rule::kNone &&
                 TryPreempt(snap, job, idx, now, leaf, quota == queue::QuotaLedger::Kind::kWithin, &work, &st, &out)) {
        placed = true;
      }
      if (placed) {
        Placement& p = out.placements[before];
        if (leaf >= 0) {
          p.borrowing = quota == queue::QuotaLedger::Kind::kBorrow;
          st.ledger->Add(leaf, tree->Charge(req, &p.assignment, topo));
          st.Refresh(snap, static_cast<uint32_t>(leaf));
        }
        p.borrowing = p.borrowing || job.tier == job::Tier::kOpportunistic;
        gpus_exhausted = req.total_milli_gpu > 0 ? NoGpuLeft(work) : gpus_exhausted && NoGpuLeft(work);
        continue;
      }
      const Reason& never = never_of(req);
      why = never.rule != Rule::kNone ? never : placement::ExplainNotNow(work, req, opts);
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
    out.waiting.push_back({job.id, idx, why, {}});
  }
  return out;
}

}  // namespace hangar::sched
