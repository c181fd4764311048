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

// One cycle: its private copy of the usage and what it has learnt so far, with one method per
// stage -- job order (Next, StopsBefore), admission (Admit), placement (Place), preemption
// (TryPreempt) and backfill (Block). Built and used by Scheduler::Cycle only.
class Scheduler::Run {
 public:
  Run(Scheduler& s, const Snapshot& snap, Time now);
  // Whether the cycle stops before position `pos` of the order (the placement cap, or nothing
  // left can start); then the rest are named in Decisions::unexamined.
  bool StopsBefore(uint32_t pos);
  // The pending job (index) at position `pos`: the policy's order, or with queues the next job
  // of the queue with the lowest fair-share key.
  uint32_t Next(uint32_t pos);
  // Places the job, or says why not.
  void Examine(uint32_t idx);
  Decisions Take() { return std::move(out_); }

 private:
  using Kind = queue::QuotaLedger::Kind;
  void ChargeRunning();
  void SortIntoQueues();
  void FairShareKey(uint32_t q);
  bool Admit(const PendingJob& job, uint32_t idx, int leaf, Kind* quota);
  bool Place(const PendingJob& job, uint32_t idx, int leaf, Kind quota, bool may_use_reserved);
  void Placed(const PendingJob& job, size_t placement, int leaf, Kind quota);
  bool TryPreempt(const PendingJob& job, uint32_t idx, int leaf, bool within);
  std::vector<uint8_t> Eligible(const PendingJob& job, int leaf, bool reclaim, std::vector<uint8_t>* reclaimed) const;
  std::string WhyPreempted(const PendingJob& job, const RunningJob& victim, int leaf, bool reclaimed,
                           int64_t lost_gpu_ms) const;
  Reason Explain(const GangRequest& req);
  void Block(const PendingJob& job);
  void StopBefore(uint32_t pos);
  const Reason& NeverOf(const GangRequest& req);

  const SchedulerConfig& cfg_;
  placement::GangPlacer& placer_;
  const std::vector<uint32_t>& order_;
  const Snapshot& snap_;
  const Time now_;
  const queue::QueueTree* tree_;
  cluster::ClusterUsage work_;
  const cluster::Topology& topo_;
  placement::PlaceOptions opts_;
  Decisions out_;

  // Backfill: the reservation, and the first job that could not start.
  bool reserved_ = false;
  Reservation reservation_;
  std::vector<uint8_t> reserved_nodes_;
  JobId first_blocked_ = 0;
  bool blocked_ = false;
  // Placement: why a shape failed (cleared by a preemption, which frees what it failed for), and
  // whether a shape can ever fit.
  std::unordered_map<ShapeKey, Reason, ShapeKeyHash> failed_;
  std::unordered_map<uint64_t, Reason> never_;  // fingerprint -> never-reason or kNone
  bool gpus_exhausted_ = false;
  // Preemption: victims so far, and under kGittins the highest rank among preemptible running
  // jobs and the least rank from each position of the order on.
  std::vector<uint8_t> preempted_;  // per running job
  int victims_ = 0;
  int64_t top_rank_ = 0;
  std::vector<int64_t> least_rank_from_;
  // Admission, with queues: every queue's position, what each running job is charged (the
  // owner's RunningJob::charge, or computed into charge_store_, reserved up front so the
  // pointers stay valid; null: not charged), and whether a guarantee may be reclaimed.
  std::optional<queue::QuotaLedger> ledger_;
  // Quota verdicts per (queue, shape, tier), with the words of a denial; valid while the ledger
  // holds still (cleared by every placement and preemption that changes it).
  struct QuotaAnswer {
    queue::QuotaLedger::Verdict verdict;
    std::string detail;
  };
  std::unordered_map<ShapeKey, QuotaAnswer, ShapeKeyHash> quota_answers_;
  std::vector<const std::vector<int64_t>*> running_charge_;
  std::vector<std::vector<int64_t>> charge_store_;
  bool reclaim_possible_ = false;
  // Job order with queues: each queue's jobs in policy order (one more list for jobs without a
  // valid queue), a cursor into each, and the queue's fair-share key: its dominant share beyond
  // its guarantee, counting usage as the larger of now and its decayed history (so a queue
  // whose job just ended is not refilled first, and one that used little lately goes first);
  // then its share now. Keys are recomputed when stale.
  std::vector<std::vector<uint32_t>> lists_;
  std::vector<size_t> cursor_;
  std::vector<std::pair<double, double>> share_;
  std::vector<uint8_t> stale_;
};

Scheduler::Run::Run(Scheduler& s, const Snapshot& snap, Time now)
    : cfg_(s.config_), placer_(s.placer_), order_(s.order_), snap_(snap), now_(now), tree_(snap.queues),
      work_(*snap.usage), topo_(work_.topology()), opts_{s.scorer_.get(), snap.profile, nullptr, snap.random_seed} {
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

// Admission: charge what runs to its queue.
void Scheduler::Run::ChargeRunning() {
  ledger_.emplace(tree_);
  running_charge_.assign(snap_.running.size(), nullptr);
  charge_store_.reserve(snap_.running.size());
  for (size_t i = 0; i < snap_.running.size(); ++i) {
    const RunningJob& r = snap_.running[i];
    if (!ValidLeaf(tree_, r.queue) || !r.assignment) continue;
    if (r.charge) {
      running_charge_[i] = r.charge;
    } else {
      charge_store_.push_back(tree_->Charge(*r.request, r.assignment, topo_));
      running_charge_[i] = &charge_store_.back();
    }
    ledger_->Add(static_cast<int>(r.queue), *running_charge_[i]);
  }
  if (!cfg_.preemption.reclaim_quota) return;
  for (size_t i = 0; i < snap_.running.size() && !reclaim_possible_; ++i) {
    const RunningJob& r = snap_.running[i];
    reclaim_possible_ = r.tier == job::Tier::kOpportunistic ||
                        (ValidLeaf(tree_, r.queue) && ledger_->Borrowed(static_cast<int>(r.queue), queue::kGpu) > 0);
  }
}

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
  const std::vector<double>* h =
      q < snap_.queue_history.size() && !snap_.queue_history[q].empty() ? &snap_.queue_history[q] : nullptr;
  share_[q] = {ledger_->Share(static_cast<int>(q), h, true), ledger_->Share(static_cast<int>(q), nullptr, false)};
}

uint32_t Scheduler::Run::Next(uint32_t pos) {
  if (!tree_) return order_[pos];
  size_t best = lists_.size();
  for (size_t q = 0; q < lists_.size(); ++q) {
    if (cursor_[q] >= lists_[q].size()) continue;
    FairShareKey(static_cast<uint32_t>(q));
    if (best == lists_.size() || share_[q] < share_[best]) best = q;
  }
  return lists_[best][cursor_[best]++];
}

bool Scheduler::Run::StopsBefore(uint32_t pos) {
  const bool capped =
      cfg_.max_placements > 0 && out_.placements.size() >= static_cast<size_t>(cfg_.max_placements);
  const bool none_can_preempt =
      (cfg_.preemption.mode == PreemptionMode::kNone ||
       (cfg_.preemption.mode == PreemptionMode::kGittins && least_rank_from_[tree_ ? 0 : pos] >= top_rank_)) &&
      !reclaim_possible_;
  if (!capped && !(gpus_exhausted_ && snap_.cpu_only_pending == 0 && none_can_preempt)) return false;
  StopBefore(pos);
  return true;
}

// Names the jobs the cycle stops before, from position `pos` of the order on.
void Scheduler::Run::StopBefore(uint32_t pos) {
  out_.not_examined = {Rule::kNotNowNotExamined};
  if (!tree_) {
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
      out_.unexamined.push_back(job.id);
    }
  }
}

const Reason& Scheduler::Run::NeverOf(const GangRequest& req) {
  auto nv = never_.find(req.fingerprint);
  if (nv == never_.end()) nv = never_.emplace(req.fingerprint, placement::CheckNever(topo_, req)).first;
  return nv->second;
}

void Scheduler::Run::Examine(uint32_t idx) {
  const PendingJob& job = snap_.pending[idx];
  const GangRequest& req = *job.request;
  out_.examined++;
  if (cfg_.strict_order && blocked_) {
    Reason r;
    r.rule = Rule::kNotNowBlocked;
    r.other = first_blocked_;
    out_.waiting.push_back({job.id, idx, r, {}});
    return;
  }
  // Quota first: a job its queue may not start now waits without holding anyone up.
  const int leaf = ValidLeaf(tree_, job.queue) ? static_cast<int>(job.queue) : -1;
  Kind quota = Kind::kWithin;
  if (leaf >= 0 && !Admit(job, idx, leaf, &quota)) return;
  // EASY: a job may use the reserved nodes only if it surely ends before the reservation.
  const bool may_use_reserved = !reserved_ || (job.time_limit > 0 && reservation_.start != kNever &&
                                               now_ + job.time_limit <= reservation_.start);
  const ShapeKey key{req.fingerprint, PreemptionRank(cfg_.preemption, job), leaf, may_use_reserved, quota, job.tier};
  Reason why;
  if (auto seen = failed_.find(key); seen != failed_.end()) {
    why = seen->second;
  } else if (Place(job, idx, leaf, quota, may_use_reserved)) {
    return;
  } else {
    why = Explain(req);
    failed_.emplace(key, why);
  }
  if (!why.IsNever()) Block(job);
  out_.waiting.push_back({job.id, idx, why, {}});
}

// Admission: false when the job's queue may not start it now (its verdict is recorded).
bool Scheduler::Run::Admit(const PendingJob& job, uint32_t idx, int leaf, Kind* quota) {
  const ShapeKey key{job.request->fingerprint, 0, leaf, false, Kind::kWithin, job.tier};
  auto [it, fresh] = quota_answers_.try_emplace(key);
  QuotaAnswer& a = it->second;
  if (fresh) {
    std::vector<int64_t> computed;
    if (!job.charge) computed = tree_->Charge(*job.request, nullptr, topo_);
    a.verdict = ledger_->Check(leaf, job.charge ? *job.charge : computed, job.tier == job::Tier::kGuaranteed);
  }
  const queue::QuotaLedger::Verdict& qv = a.verdict;
  *quota = qv.kind;
  if (qv.kind != Kind::kDenied) return true;
  const Reason& never = NeverOf(*job.request);
  Verdict v{job.id, idx, never, {}};
  if (never.rule == Rule::kNone) {
    v.reason.rule = Rule::kNotNowQuota;
    v.reason.need = qv.need;
    v.reason.have = qv.have;
    if (a.detail.empty()) a.detail = ledger_->Explain(qv, leaf);
    v.detail = a.detail;
  }
  out_.waiting.push_back(std::move(v));
  return false;
}

// Placement: the whole gang where it fits now, or by preempting what it outranks.
bool Scheduler::Run::Place(const PendingJob& job, uint32_t idx, int leaf, Kind quota, bool may_use_reserved) {
  opts_.excluded = may_use_reserved ? nullptr : &reserved_nodes_;
  placement::PlaceResult r = placer_.Place(work_, *job.request, opts_);
  const size_t before = out_.placements.size();
  if (r.placed) {
    Placement p;
    p.job = job.id;
    p.pending_index = idx;
    p.assignment = std::move(r.assignment);
    p.locality = r.locality;
    p.backfilled = reserved_;
    out_.placements.push_back(std::move(p));
  } else if (NeverOf(*job.request).rule != Rule::kNone || !TryPreempt(job, idx, leaf, quota == Kind::kWithin)) {
    return false;
  }
  Placed(job, before, leaf, quota);
  return true;
}

void Scheduler::Run::Placed(const PendingJob& job, size_t placement, int leaf, Kind quota) {
  Placement& p = out_.placements[placement];
  if (leaf >= 0) {
    p.borrowing = quota == Kind::kBorrow;
    ledger_->Add(leaf, tree_->Charge(*job.request, &p.assignment, topo_));
    stale_[static_cast<uint32_t>(leaf)] = 1;
    quota_answers_.clear();
  }
  p.borrowing = p.borrowing || job.tier == job::Tier::kOpportunistic;
  gpus_exhausted_ = job.request->total_milli_gpu > 0 ? NoGpuLeft(work_) : gpus_exhausted_ && NoGpuLeft(work_);
}

Reason Scheduler::Run::Explain(const GangRequest& req) {
  const Reason& never = NeverOf(req);
  Reason why = never.rule != Rule::kNone ? never : placement::ExplainNotNow(work_, req, opts_);
  if (why.rule == Rule::kNotNowReserved) {
    why.other = reservation_.job;
    why.at = reservation_.start;
  }
  return why;
}

// Backfill: the first job that cannot start now reserves nodes (EASY); later ones may not
// delay it.
void Scheduler::Run::Block(const PendingJob& job) {
  if (!blocked_) first_blocked_ = job.id;
  blocked_ = true;
  if (cfg_.backfill != BackfillMode::kEasy || cfg_.strict_order || reserved_) return;
  opts_.excluded = nullptr;
  ShadowPlan plan = PlanReservation(work_, snap_.running, out_.placements, snap_.pending, *job.request, placer_,
                                    opts_, now_);
  if (!plan.found) return;
  reserved_ = true;
  reservation_ = {job.id, plan.start, plan.nodes};
  for (uint32_t n : plan.nodes) reserved_nodes_[n] = 1;
  out_.reservations.push_back(reservation_);
}

// With queues the victims are chosen here: borrowers when reclaiming a guarantee (jobs of other
// queues beyond their guarantee, opportunistic jobs), and otherwise only jobs the policy's rule
// lets it outrank within its own queue (or opportunistic ones): a borrower never preempts
// another queue's guaranteed work.
std::vector<uint8_t> Scheduler::Run::Eligible(const PendingJob& job, int leaf, bool reclaim,
                                              std::vector<uint8_t>* reclaimed) const {
  std::vector<uint8_t> eligible(snap_.running.size(), 0);
  reclaimed->assign(snap_.running.size(), 0);
  for (size_t i = 0; i < snap_.running.size(); ++i) {
    const RunningJob& r = snap_.running[i];
    const int rq = ValidLeaf(tree_, r.queue) ? static_cast<int>(r.queue) : -1;
    const bool opportunistic = r.tier == job::Tier::kOpportunistic;
    const std::vector<int64_t>* charge = running_charge_[i];
    const bool borrower = opportunistic || (rq >= 0 && rq != leaf && charge && !charge->empty() &&
                                            ledger_->Borrowed(rq, queue::kGpu) >= (*charge)[queue::kGpu] &&
                                            (*charge)[queue::kGpu] > 0);
    if (reclaim && borrower) {
      eligible[i] = (*reclaimed)[i] = 1;
    } else if (cfg_.preemption.mode != PreemptionMode::kNone && (rq == leaf || opportunistic) &&
               Outranks(cfg_.preemption, job, r, now_)) {
      eligible[i] = 1;
    }
  }
  return eligible;
}

std::string Scheduler::Run::WhyPreempted(const PendingJob& job, const RunningJob& victim, int leaf, bool reclaimed,
                                         int64_t lost_gpu_ms) const {
  const std::string lost = "; of the jobs that may be preempted it loses the least work (" +
                           GpuText(lost_gpu_ms / 3600) + " GPU-hours since its last checkpoint)";
  const std::string id = "job " + std::to_string(job.id);
  if (reclaimed) {
    const int rq = ValidLeaf(tree_, victim.queue) ? static_cast<int>(victim.queue) : -1;
    return id + " reclaims queue " + tree_->nodes()[leaf].name + "'s guarantee: " +
           (victim.tier == job::Tier::kOpportunistic
                ? std::string("this job is opportunistic")
                : "queue " + tree_->nodes()[rq].name + " runs " + GpuText(ledger_->Borrowed(rq, queue::kGpu)) +
                      " GPUs beyond its guarantee") +
           lost;
  }
  const std::vector<int64_t>& t = cfg_.preemption.las_thresholds;
  switch (cfg_.preemption.mode) {
    case PreemptionMode::kGittins:
      return id + " is expected to need less GPU time per completion (rank " + std::to_string(job.rank / 1000) +
             " vs " + std::to_string(victim.rank / 1000) + " GPU-s)";
    case PreemptionMode::kLas:
      return id + " has received less service (level " + std::to_string(ServiceLevel(t, job.attained_service)) +
             " vs " + std::to_string(ServiceLevel(t, victim.attained_service)) + ")";
    default:
      return id + " (priority " + std::to_string(job.priority) + ") outranks it (priority " +
             std::to_string(victim.priority) + ")";
  }
}

// Preemption: places `job` by preempting running gangs it outranks, if the policy allows and it
// helps. With queues, `within` says whether it runs within its queue's guarantee, which lets it
// reclaim that guarantee from borrowers.
bool Scheduler::Run::TryPreempt(const PendingJob& job, uint32_t idx, int leaf, bool within) {
  const PreemptionConfig& cfg = cfg_.preemption;
  if (!job.may_preempt) return false;
  const bool reclaim = leaf >= 0 && within && cfg.reclaim_quota && job.tier == job::Tier::kGuaranteed;
  if (cfg.mode == PreemptionMode::kNone && !reclaim) return false;
  if (cfg.max_victims_per_cycle > 0 && victims_ >= cfg.max_victims_per_cycle) return false;
  if (!reclaim && cfg.mode == PreemptionMode::kGittins && job.rank >= top_rank_) return false;
  placement::PlaceOptions opts{opts_.scorer, snap_.profile, nullptr, snap_.random_seed};
  std::vector<uint8_t> eligible, reclaimed;  // reclaimed: victim taken as a borrower
  PreemptionConfig pcfg = cfg;
  if (tree_) {
    eligible = Eligible(job, leaf, reclaim, &reclaimed);
    if (reclaim) pcfg.mode = PreemptionMode::kQuota;
  }
  PreemptionPlan plan = PlanPreemption(pcfg, work_, snap_.running, preempted_, job, placer_, opts, now_,
                                       tree_ ? &eligible : nullptr);
  if (!plan.found) return false;
  Placement p;
  p.job = job.id;
  p.pending_index = idx;
  p.assignment = std::move(plan.placement.assignment);
  p.locality = plan.placement.locality;
  for (size_t v : plan.victims) {
    const RunningJob& victim = snap_.running[v];
    preempted_[v] = 1;
    victims_++;
    p.preempted.push_back(victim.id);
    Preemption pre;
    pre.victim = victim.id;
    pre.for_job = job.id;
    pre.lost_gpu_ms = victim.assignment->TotalMilliGpu(topo_) *
                      std::max<Time>(0, now_ - std::max(victim.start, victim.last_checkpoint)) / 1000;
    pre.why = WhyPreempted(job, victim, leaf, tree_ && reclaimed[v], pre.lost_gpu_ms);
    if (tree_ && running_charge_[v] && !running_charge_[v]->empty()) {
      ledger_->Remove(static_cast<int>(victim.queue), *running_charge_[v]);
      stale_[victim.queue] = 1;
      quota_answers_.clear();
    }
    out_.preemptions.push_back(std::move(pre));
  }
  out_.placements.push_back(std::move(p));
  // The victims' release may let shapes that failed before fit now: forget those answers.
  failed_.clear();
  return true;
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
  for (uint32_t pos = 0; pos < order_.size() && !run.StopsBefore(pos); ++pos) run.Examine(run.Next(pos));
  // 4. The owner commits the decisions, then acts.
  return run.Take();
}

}  // namespace hangar::sched
