// One scheduling cycle: its stages as objects with their own state over one shared Context, and
// Scheduler::Run, which takes each job through them -- private to src/sched/:
//   cycle_order.cc      FairShareOrder: with queues, the next job by fair share; where the cycle
//                       stops early (Run::StopsBefore)
//   cycle_admission.cc  QuotaAdmission: the quota ledger and what each job's queue may start now
//   cycle_placement.cc  Run::Examine and Place: the whole gang where it fits now, FailedShapes (the
//                       per-shape answers), the reasons
//   cycle_preemption.cc Preemptor: who may be a victim, the plan, and why each was chosen
//   cycle_backfill.cc   Backfill: the first blocked job's reservation (EASY)
//   cycle_mig.cc        MIG reshapes for the MIG jobs no instance could take (mig_reshape.h)
// scheduler.cc holds Scheduler::Cycle, which reads as the table of contents of a cycle.
#pragma once

#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "sched/backfill.h"
#include "sched/queue/quota.h"
#include "sched/scheduler.h"
#include "sched/windows.h"

namespace hangar::sched {

namespace cycle {

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
  WindowGate::Key windows;  // the nodes reservation windows keep it off
  bool operator==(const ShapeKey&) const = default;
};

struct ShapeKeyHash {
  size_t operator()(const ShapeKey& k) const {
    uint64_t h = k.fingerprint;
    for (uint64_t v : {static_cast<uint64_t>(k.preemption_rank), static_cast<uint64_t>(k.leaf),
                       static_cast<uint64_t>(k.may_use_reserved), static_cast<uint64_t>(k.quota),
                       static_cast<uint64_t>(k.tier), static_cast<uint64_t>(k.windows.member),
                       static_cast<uint64_t>(k.windows.crossed)}) {
      h ^= v + 0x9E3779B97F4A7C15ull + (h << 6) + (h >> 2);
    }
    return static_cast<size_t>(h);
  }
};

}  // namespace cycle

namespace cycle {

// What makes two jobs of one shape differ for preemption: their rank.
inline int64_t PreemptionRank(const PreemptionConfig& cfg, const PendingJob& job) {
  switch (cfg.mode) {
    case PreemptionMode::kNone:
      return 0;
    case PreemptionMode::kPriority:
      return job.priority * 2 + (job.tier == job::Tier::kGuaranteed);
    case PreemptionMode::kLas:
      return ServiceLevel(cfg.las_thresholds, job.attained_service);
    // The "gittins" queue is in rank order and a higher rank outranks fewer victims, so a shape
    // that failed for one job fails for every later one: the shape alone is the key.
    case PreemptionMode::kGittins:
    case PreemptionMode::kQuota:
      return 0;
  }
  return 0;
}

inline bool ValidLeaf(const queue::QueueTree* tree, uint32_t q) {
  return tree && q < tree->nodes().size() && tree->nodes()[q].leaf();
}

inline std::string GpuText(int64_t milli) {
  return milli % 1000 == 0
             ? std::to_string(milli / 1000)
             : std::to_string(milli / 1000) + "." + std::to_string(milli % 1000 / 100);
}

inline bool NoGpuLeft(const cluster::ClusterUsage& u) {
  const auto& all = u.domain(cluster::Level::kCluster, 0);
  if (all.free_milli > 0) return false;
  for (uint32_t n = 0; n < u.topology().nodes().size(); ++n) {
    if (u.node(n).max_mig_free_slices > 0 && u.node(n).condition.schedulable) return false;
  }
  return true;
}

}  // namespace cycle

using cycle::GpuText;
using cycle::NoGpuLeft;
using cycle::PreemptionRank;
using cycle::ShapeKey;
using cycle::ShapeKeyHash;
using cycle::ValidLeaf;

namespace cycle {

// What every stage of one cycle reads: the configuration, the snapshot, the job order and the
// cycle's private copy of the usage (which placement and preemption change as they plan). Built
// by Scheduler::Run before its stages, and outlives them.
struct Context {
  const SchedulerConfig& cfg;
  const Snapshot& snap;
  Time now;
  const std::vector<uint32_t>& order;  // the policy's order of snap.pending (indices)
  const queue::QueueTree* tree;        // null: no queues
  cluster::ClusterUsage& work;
  const cluster::Topology& topo;
  placement::GangPlacer& placer;
};

// Admission, with queues (cycle_admission.cc): the quota ledger with what runs charged to its
// queue, and whether a job's queue may start it now. Verdicts are kept per (queue, shape, tier)
// while the ledger holds still: every charge or release forgets them.
class QuotaAdmission {
 public:
  using Kind = queue::QuotaLedger::Kind;
  struct Answer {
    queue::QuotaLedger::Verdict verdict;
    std::string detail;  // the words of a denial, filled by the first caller that reads them
  };
  explicit QuotaAdmission(const Context& c);
  // The verdict of queue `leaf` on starting `job` now.
  Answer& Check(const PendingJob& job, int leaf);
  // The words of a denial, computed once per answer.
  const std::string& Detail(Answer& a, int leaf) const;
  // A placement charged to its queue (`leaf`).
  void Charge(int leaf, const GangRequest& req, const cluster::GangAssignment& a);
  // A running job (index into snap.running) preempted: its charge leaves its queue. False when it
  // was not charged.
  bool Release(size_t running);
  // What running job `i` is charged (null: not charged to any queue).
  const std::vector<int64_t>* charge(size_t i) const { return running_charge_[i]; }
  // Whether some guarantee could be reclaimed from a borrower or an opportunistic job.
  bool reclaim_possible() const { return reclaim_possible_; }
  const queue::QuotaLedger& ledger() const { return ledger_; }

 private:
  const Context& c_;
  queue::QuotaLedger ledger_;
  std::unordered_map<ShapeKey, Answer, ShapeKeyHash> answers_;
  // Per running job: the owner's RunningJob::charge, or one computed into charge_store_
  // (reserved up front so the pointers stay valid).
  std::vector<const std::vector<int64_t>*> running_charge_;
  std::vector<std::vector<int64_t>> charge_store_;
  bool reclaim_possible_ = false;
};

// Job order with queues (cycle_order.cc): each queue's jobs in policy order (one more list for
// jobs without a valid queue), a cursor into each, and the queue's fair-share key: its dominant
// share beyond its guarantee, counting usage as the larger of now and its decayed history (so a
// queue whose job just ended is not refilled first, and one that used little lately goes first);
// then its share now. Keys are recomputed when stale.
class FairShareOrder {
 public:
  FairShareOrder(const Context& c, const queue::QuotaLedger& ledger);
  // The next job (index into snap.pending): the head of the queue with the lowest key.
  uint32_t Next();
  // Queue `q`'s usage changed: its key is recomputed before its next comparison.
  void Stale(uint32_t q) { stale_[q] = 1; }
  // The jobs not taken yet, queue by queue: fn(index, whether it heads its queue's rest).
  template <class Fn>
  void ForEachLeft(Fn fn) const {
    for (size_t q = 0; q < lists_.size(); ++q) {
      for (size_t k = cursor_[q]; k < lists_[q].size(); ++k) fn(lists_[q][k], k == cursor_[q]);
    }
  }

 private:
  void Key(uint32_t q);

  const Context& c_;
  const queue::QuotaLedger& ledger_;
  std::vector<std::vector<uint32_t>> lists_;
  std::vector<size_t> cursor_;
  std::vector<std::pair<double, double>> share_;
  std::vector<uint8_t> stale_;
};

// Backfill (cycle_backfill.cc): the first job that cannot start now reserves nodes (EASY); later
// ones may use them only if they surely end before it starts.
class Backfill {
 public:
  explicit Backfill(const Context& c);
  // Whether `job` may use the reserved nodes.
  bool MayUseReserved(const PendingJob& job) const;
  // The nodes a job kept off the reservation may not use (null: any).
  const std::vector<uint8_t>* Excluded(bool may_use_reserved) const {
    return may_use_reserved ? nullptr : &reserved_nodes_;
  }
  // `job` could not start: the first such job blocks strict order and, under EASY, reserves the
  // nodes where it starts first (planned with `opts`, after `placed`); a reservation made is
  // appended to `out`.
  void Block(const PendingJob& job, const placement::PlaceOptions& opts,
             std::span<const Placement> placed, ReservationScratch* scratch,
             std::vector<Reservation>* out);
  // Once blocked, Block does nothing more when the reservation is made or none is to be made.
  bool Settled() const {
    return blocked_ && (reserved_ || c_.cfg.backfill != BackfillMode::kEasy || c_.cfg.strict_order);
  }
  bool blocked() const { return blocked_; }
  JobId first_blocked() const { return first_blocked_; }
  bool reserved() const { return reserved_; }
  const Reservation& reservation() const { return reservation_; }

 private:
  const Context& c_;
  bool reserved_ = false;
  Reservation reservation_;
  std::vector<uint8_t> reserved_nodes_;
  JobId first_blocked_ = 0;
  bool blocked_ = false;
};

// Preemption (cycle_preemption.cc): places a job by preempting running gangs it outranks (or, with
// queues, borrowers of the guarantee it reclaims), and says why each victim was chosen. Keeps the
// victims so far and, under kGittins, the highest rank among preemptible running jobs and the
// least rank from each position of the order on.
class Preemptor {
 public:
  // `admission` and `order` are null without queues; a victim's release goes through them.
  Preemptor(const Context& c, QuotaAdmission* admission, FairShareOrder* order);
  // Whether no job from position `pos` of the order on may preempt (reclaiming aside).
  bool NoneFrom(uint32_t pos) const;
  // Places `job` (index `idx`, queue `leaf`, within its guarantee or not) by preempting, with
  // `opts` (its windows' mask): the placement and its preemptions appended to `out`.
  bool Try(const PendingJob& job, uint32_t idx, int leaf, bool within,
           const placement::PlaceOptions& opts, Decisions* out);

 private:
  std::vector<uint8_t> Eligible(const PendingJob& job, int leaf, bool reclaim,
                                std::vector<uint8_t>* reclaimed) const;
  std::string WhyPreempted(const PendingJob& job, const RunningJob& victim, int leaf,
                           bool reclaimed, int64_t lost_gpu_ms) const;

  const Context& c_;
  QuotaAdmission* admission_;
  FairShareOrder* order_;
  std::vector<uint8_t> preempted_;  // per running job
  int victims_ = 0;
  int64_t top_rank_ = 0;
  std::vector<int64_t> least_rank_from_;
};

// Placement's memory within one cycle (cycle_placement.cc): why a shape failed, so the next job
// of that shape gets the answer without a search. A preemption frees what shapes failed for, and
// forgets them.
class FailedShapes {
 public:
  const Reason* Find(const ShapeKey& key);
  void Remember(const ShapeKey& key, const Reason& why);
  void Forget() {
    failed_.clear();
    last_.reset();
  }

 private:
  std::unordered_map<ShapeKey, Reason, ShapeKeyHash> failed_;
  std::optional<ShapeKey> last_;  // the last key looked up (a sweep's jobs come one after another)
  Reason last_reason_;
};

}  // namespace cycle

// One cycle: the stages above over a shared Context, and the order in which a job meets them --
// windows, admission, placement (FailedShapes, then the placer), preemption, backfill. Built and
// used by Scheduler::Cycle only.
class Scheduler::Run {
 public:
  Run(Scheduler& s, const Snapshot& snap, Time now);
  // Whether the cycle stops before position `pos` of the order (the placement cap, or nothing
  // left can start); then the rest are named in Decisions::unexamined.
  // Called once per examined job, so the common answers are inline.
  bool StopsBefore(uint32_t pos) {
    const bool capped = c_.cfg.max_placements > 0 &&
                        out_.placements.size() >= static_cast<size_t>(c_.cfg.max_placements);
    if (!capped && !gpus_exhausted_) return false;
    return StopsBeforeSlow(pos, capped);
  }
  // The pending job (index) at position `pos`: the policy's order, or with queues the next job
  // of the queue with the lowest fair-share key.
  uint32_t Next(uint32_t pos) { return by_share_ ? by_share_->Next() : c_.order[pos]; }
  // Places the job, or says why not.
  void Examine(uint32_t idx);
  // After the last job: MIG reshapes for the MIG jobs that found no instance (cycle_mig.cc).
  void PlanReshapes();
  Decisions Take() { return std::move(out_); }

 private:
  using Kind = queue::QuotaLedger::Kind;
  bool StopsBeforeSlow(uint32_t pos, bool capped);
  void StopBefore(uint32_t pos);
  bool Admit(const PendingJob& job, uint32_t idx, int leaf, Kind* quota);
  bool Place(const PendingJob& job, uint32_t idx, int leaf, Kind quota, bool may_use_reserved);
  void Placed(const PendingJob& job, size_t placement, int leaf, Kind quota);
  Reason Explain(const GangRequest& req, bool may_use_reserved);
  const Reason& NeverOf(const GangRequest& req);

  Scheduler& scheduler_;
  const cycle::Context c_;
  placement::PlaceOptions opts_;
  Decisions out_;
  // Reservation windows (windows.h), and what they keep the job being examined off.
  WindowGate windows_;
  WindowGate::Key window_key_;
  const std::vector<uint8_t>* window_mask_ = nullptr;
  bool gpus_exhausted_ = false;
  // The stages that keep state across the cycle's jobs (the first two only with queues).
  std::optional<cycle::QuotaAdmission> admission_;
  std::optional<cycle::FairShareOrder> by_share_;
  cycle::Backfill backfill_;
  cycle::Preemptor preemptor_;
  cycle::FailedShapes failed_;
};

}  // namespace hangar::sched
