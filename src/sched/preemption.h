// The preemption planner: when a job that outranks running work cannot start, pick victims --
// whole gangs only -- whose release lets it start, losing the least work. A victim never is a job
// younger than its minimum run time, nor one the job does not outrank.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "cluster/usage.h"
#include "sched/placement/gang_placer.h"
#include "sched/snapshot.h"

namespace hangar::sched {

enum class PreemptionMode : uint8_t {
  kNone,
  kPriority,  // a higher-priority guaranteed job may preempt lower-priority or opportunistic work
  kLas,       // least attained service (Tiresias): a job in a higher service level preempts
  kGittins,   // a job preempts one of higher Gittins rank (PendingJob::rank); with the "gittins"
              // queue
  kQuota,     // internal: a job within its queue's guarantee reclaims it from borrowers
};

struct PreemptionConfig {
  PreemptionMode mode = PreemptionMode::kNone;
  // Service levels for kLas, in GPU-milliseconds: level i holds jobs with attained service below
  // thresholds[i]. A job preempts only jobs in a strictly lower level.
  std::vector<int64_t> las_thresholds = {3600LL * 1000, 10LL * 3600 * 1000};
  // Preempt at most this many gangs per cycle (0: no limit).
  int max_victims_per_cycle = 0;
  // Among equally ranked victims prefer the narrowest (fewest GPUs), so a 1-GPU job does not
  // tear down an 8-GPU gang while a 1-GPU victim would do.
  bool prefer_narrow_victims = false;
  // A job, once started, runs at least this long before it may be preempted (on top of its own
  // min_run_time); damps thrashing.
  Duration min_run_before_preempt = 0;
  // kGittins: a job preempts a running one only when its rank times this is still below the
  // victim's: a preemption costs the victim its restore and its place, so it must buy a clearly
  // more urgent job (1: any lower rank). Damps thrashing between jobs of similar rank, e.g. a
  // gang whose rank grows with age against each new job of its size.
  double gittins_margin = 1.0;
  // With queues: a guaranteed job within its queue's guarantee preempts jobs that borrow (other
  // queues' jobs beyond their guarantee, opportunistic jobs) when it cannot start otherwise.
  bool reclaim_quota = true;
};

// The service level of `attained` GPU-ms under `thresholds` (0 is the most favoured).
int ServiceLevel(const std::vector<int64_t>& thresholds, int64_t attained);

// True when `job` may preempt `victim` at `now`.
bool Outranks(const PreemptionConfig& cfg, const PendingJob& job, const RunningJob& victim,
              Time now);

struct PreemptionPlan {
  bool found = false;
  std::vector<size_t> victims;  // indices into `running`
  placement::PlaceResult placement;
};

// Finds victims among `running` (skipping those in `taken`, already preempted this cycle) so that
// `job` fits `work`. On success the victims are released on `work` and the job is placed there;
// on failure `work` is unchanged. `eligible`, when given, says per running job whether the caller
// allows it as a victim (instead of Outranks; the minimum run time still holds).
PreemptionPlan PlanPreemption(const PreemptionConfig& cfg, cluster::ClusterUsage& work,
                              std::span<const RunningJob> running,
                              const std::vector<uint8_t>& taken, const PendingJob& job,
                              placement::GangPlacer& placer, const placement::PlaceOptions& opts,
                              Time now, const std::vector<uint8_t>* eligible = nullptr);

}  // namespace hangar::sched
