// One scheduling cycle's working state and its stages (Scheduler::Run), shared by the files that
// implement them -- private to src/sched/:
//   cycle_order.cc      job order: the policy's (or the owner's presorted) order, fair share across
//                       queues, and when the cycle stops early
//   cycle_admission.cc  admission: the quota ledger and what each job's queue may start now
//   cycle_placement.cc  placement: the whole gang where it fits now, the per-shape answers, reasons
//   cycle_preemption.cc preemption: who may be a victim, the plan, and why each was chosen
//   cycle_backfill.cc   backfill: the first blocked job's reservation (EASY)
//   cycle_mig.cc        MIG reshapes for the MIG jobs no instance could take (mig_reshape.h)
// scheduler.cc holds Scheduler::Cycle, which reads as the table of contents of a cycle.
#pragma once

#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

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

// One cycle: its private copy of the usage and what it has learnt so far, with one method per
// stage -- job order (Next, StopsBefore), admission (Admit), placement (Place), preemption
// (TryPreempt) and backfill (Block). Built and used by Scheduler::Cycle only.
class Scheduler::Run {
 public:
  Run(Scheduler& s, const Snapshot& snap, Time now);
  // Whether the cycle stops before position `pos` of the order (the placement cap, or nothing
  // left can start); then the rest are named in Decisions::unexamined.
  // Called once per examined job, so the common answers are inline.
  bool StopsBefore(uint32_t pos) {
    const bool capped = cfg_.max_placements > 0 &&
                        out_.placements.size() >= static_cast<size_t>(cfg_.max_placements);
    if (!capped && !gpus_exhausted_) return false;
    return StopsBeforeSlow(pos, capped);
  }
  // The pending job (index) at position `pos`: the policy's order, or with queues the next job
  // of the queue with the lowest fair-share key.
  uint32_t Next(uint32_t pos) { return tree_ ? NextByShare() : order_[pos]; }
  // Places the job, or says why not.
  void Examine(uint32_t idx);
  // After the last job: MIG reshapes for the MIG jobs that found no instance (cycle_mig.cc).
  void PlanReshapes();
  Decisions Take() { return std::move(out_); }

 private:
  using Kind = queue::QuotaLedger::Kind;
  bool StopsBeforeSlow(uint32_t pos, bool capped);
  uint32_t NextByShare();
  void ChargeRunning();
  void SortIntoQueues();
  void FairShareKey(uint32_t q);
  bool Admit(const PendingJob& job, uint32_t idx, int leaf, Kind* quota);
  bool Place(const PendingJob& job, uint32_t idx, int leaf, Kind quota, bool may_use_reserved);
  void Placed(const PendingJob& job, size_t placement, int leaf, Kind quota);
  bool TryPreempt(const PendingJob& job, uint32_t idx, int leaf, bool within);
  std::vector<uint8_t> Eligible(const PendingJob& job, int leaf, bool reclaim,
                                std::vector<uint8_t>* reclaimed) const;
  std::string WhyPreempted(const PendingJob& job, const RunningJob& victim, int leaf,
                           bool reclaimed, int64_t lost_gpu_ms) const;
  Reason Explain(const GangRequest& req, bool may_use_reserved);
  void Block(const PendingJob& job);
  void StopBefore(uint32_t pos);
  const Reason& NeverOf(const GangRequest& req);

  Scheduler& scheduler_;
  const SchedulerConfig& cfg_;
  placement::GangPlacer& placer_;
  const std::vector<uint32_t>& order_;
  const Snapshot& snap_;
  const Time now_;
  const queue::QueueTree* tree_;
  cluster::ClusterUsage& work_;  // the scheduler's copy of the snapshot's usage
  const cluster::Topology& topo_;
  placement::PlaceOptions opts_;
  Decisions out_;

  // Reservation windows (windows.h), and what they keep the job being examined off.
  WindowGate windows_;
  WindowGate::Key window_key_;
  const std::vector<uint8_t>* window_mask_ = nullptr;
  // Backfill: the reservation, and the first job that could not start.
  bool reserved_ = false;
  Reservation reservation_;
  std::vector<uint8_t> reserved_nodes_;
  JobId first_blocked_ = 0;
  bool blocked_ = false;
  // Placement: why a shape failed (cleared by a preemption, which frees what it failed for), and
  // whether a shape can ever fit.
  std::unordered_map<ShapeKey, Reason, ShapeKeyHash> failed_;
  std::optional<ShapeKey> last_failed_;  // the last answer of failed_ looked up, and its reason
  Reason last_reason_;
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

}  // namespace hangar::sched
