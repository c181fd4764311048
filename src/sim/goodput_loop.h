// The recovery loop `hangar sim goodput` compares (docs/goodput.md): failures drawn from a
// FailureStream hit the nodes of a simulated cluster; the jobs on a failed node are interrupted
// and one large training job's goodput is booked in a TrainingLedger. What happens to that job
// is the policy's:
//  - spares: the gang keeps its healthy nodes, takes a spare (or else any free node) from the
//    smallest topology domain that keeps its rule, and restarts from its last checkpoint at once;
//  - no_spares: the gang holds its healthy nodes until a free node appears, then restarts;
//  - naive: the job fails and is resubmitted, behind every job waiting.
// Other jobs hit by a failure lose the work since their last checkpoint and queue again (at their
// old place; behind everyone under naive). A slow GPU slows the training job until it is found
// (straggler detection) and its node is swapped at the next checkpoint; a restart before that
// swaps it too (the gang's preflight finds it). Failures stop once the training job has ended.
#pragma once

#include <array>
#include <cstdint>
#include <queue>
#include <string_view>
#include <utility>
#include <vector>

#include "cluster/topology.h"
#include "job/job_spec.h"
#include "sim/engine/disruption.h"
#include "sim/failures.h"
#include "sim/goodput.h"

namespace hangar::sim {

enum class RecoveryPolicy : uint8_t { kSpares, kNoSpares, kNaive };
std::string_view RecoveryPolicyName(RecoveryPolicy p);  // "spares", "no_spares", "naive"

struct GoodputLoopConfig {
  RecoveryPolicy policy = RecoveryPolicy::kSpares;
  FailureRates rates;
  uint64_t seed = 1;
  Duration checkpoint_interval = 30 * kMinute;  // every job's, in progress
  Duration restore = 5 * kMinute;               // the training job's: load the checkpoint, warm up
  Duration other_restore = 30 * kSecond;        // any other job's
  Duration detect = 10 * kSecond;               // from a fault to the loop acting on it
  Duration replace = 15 * kSecond;              // taking a replacement and launching the gang
  Duration straggler_detect = 5 * kMinute;      // from a GPU slowing to its node named
  // Failures to replay, in time order, instead of drawing them from `rates` (the rates still give
  // each kind's repair time and the slow GPU's speed).
  std::vector<FailureEvent> scripted;
  // With kSpares: spare nodes. They run opportunistic work, interrupted when a spare is taken.
  std::vector<uint32_t> spares;
};

struct GoodputCounts {
  std::array<int, kFailureKinds> events{};  // every failure drawn, by kind (one already down: none)
  std::array<int, kFailureKinds> job_events{};  // those that hit the training job
  int spares_taken = 0;
  int spare_evictions = 0;   // spares taken from under opportunistic work
  int free_nodes_taken = 0;  // replacements that were not spares
  int waits = 0;             // recoveries that found no replacement at once
  int other_interruptions = 0;
};

class GoodputLoop : public Disruptor {
 public:
  // `job`: the training job's index in the engine; `work`: its run time without failures.
  // Failures start after `from`.
  GoodputLoop(GoodputLoopConfig config, const cluster::Topology& topo, size_t training_job,
              Duration work, job::TopologyConstraint rule, Time from);

  Time NextEvent() const override;
  void Act(Time now, SimControl& sim) override;
  // From the engine's observer: a job started (placed by the scheduler) or finished.
  void OnStart(Time now, size_t job, const cluster::GangAssignment& assignment);
  void OnFinish(Time now, size_t job);

  const TrainingLedger& ledger() const { return ledger_; }
  const GoodputCounts& counts() const { return counts_; }
  Time job_end() const { return job_end_; }
  // Every task of the training job, on the nodes it ran on last.
  const cluster::GangAssignment& gang() const { return gang_; }

 private:
  enum class Phase : uint8_t {
    kWaitingToStart,
    kRunning,
    kDetecting,
    kWaitingForNode,
    kQueued,
    kDone
  };

  void Fail(Time now, const FailureEvent& e, SimControl& sim);
  void TakeOut(Time now, uint32_t node, Duration repair, SimControl& sim);
  void InterruptOther(Time now, size_t j, SimControl& sim);
  // The training job stops (its tasks on `lost` nodes are gone) and waits for detection.
  void InterruptJob(Time now, const std::vector<uint32_t>& lost, SimControl& sim);
  void Recover(Time now, SimControl& sim);
  // Fills the missing tasks from spares and free nodes; true when none is missing any more.
  bool FindReplacements(Time now, SimControl& sim);
  void Restart(Time now, DownCause why, SimControl& sim);
  void Slow(Time now, uint32_t node, SimControl& sim);
  void Hold(Time now, SimControl& sim);  // the job keeps its healthy nodes, without progress
  bool FreeNode(const SimControl& sim, uint32_t n, size_t task) const;

  GoodputLoopConfig config_;
  const cluster::Topology& topo_;
  size_t job_;
  job::TopologyConstraint rule_;
  FailureStream failures_;
  TrainingLedger ledger_;
  GoodputCounts counts_;
  Phase phase_ = Phase::kWaitingToStart;
  bool started_ = false;          // spares kept from the training job's first placement
  bool spares_open_ = false;      // ... and open to opportunistic work since it started
  cluster::GangAssignment gang_;  // every task of the job, on its last nodes
  std::vector<size_t> missing_;   // tasks of gang_ whose node is gone
  Time recover_at_ = kNever;      // when detection ends
  uint32_t slow_node_ = UINT32_MAX;
  Time slow_swap_at_ = kNever;    // the first checkpoint after the slow GPU is named
  std::vector<Time> down_until_;  // by node: back in service then (0: in service)
  std::vector<uint8_t> spare_;    // by node: an idle spare
  size_t spare_target_ = 0;
  std::priority_queue<std::pair<Time, uint32_t>, std::vector<std::pair<Time, uint32_t>>,
                      std::greater<>>
      repairs_;
  Time job_end_ = kNever;
};

}  // namespace hangar::sim
