// What a replay engine is: jobs in, when each started and ended out. Two engines implement it:
// the lean Simulator (simulator.h), which owns the scheduler's snapshot itself, and the
// ControllerEngine (sim/controller/), which replays through the controller's own state machine
// (ClusterState) with a virtual clock and simulated agents. Both drive the same Scheduler::Cycle;
// `hangar sim replay --engine lean|controller` picks one, and the goldens and the replay
// agreement check hold the two to the same answers.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "cluster/topology.h"
#include "common/status.h"
#include "job/job_spec.h"
#include "job/queue_spec.h"
#include "sched/queue/gittins.h"
#include "sched/queue/quota.h"
#include "sched/scheduler.h"
#include "sim/engine/staging.h"

namespace hangar::sim {

struct SimJob {
  sched::JobId id = 0;
  std::string name;
  std::shared_ptr<const sched::GangRequest> request;
  Time submit = 0;
  Duration runtime = 0;     // how long it really runs (the scheduler is not told)
  Duration time_limit = 0;  // what the scheduler is told (0: nothing)
  int32_t priority = 0;
  uint32_t queue = 0;  // with SimConfig::queues: its leaf's index in the tree
  job::Tier tier = job::Tier::kGuaranteed;
  Duration min_run_time = 0;
  uint64_t seq = 0;  // tie-break: the trace's row
  // What it needs on every node it runs on, with SimConfig::staging (sim/engine/staging.h).
  std::vector<SimArtifact> artifacts;
};

struct SimJobResult {
  Time first_start = kNever;
  Time end = kNever;
  int preemptions = 0;
  bool never = false;    // the cluster can never hold it
  Duration staging = 0;  // time it held its GPUs waiting for its objects, over all its runs
};

struct SimConfig {
  sched::SchedulerConfig scheduler;
  Duration restore_cost = 30 * kSecond;  // added to a preempted job's remaining run time
  // As in the controller: a victim gets this long to checkpoint and stop, keeping its GPUs, and
  // the job it was preempted for starts once every victim has stopped (in a later cycle). 0: the
  // victim's GPUs are free at once and the preemptor starts in the same cycle.
  Duration preemption_grace = 0;
  uint64_t seed = 1;
  // Rank jobs for the "gittins" queue policy and preemption mode: learn each job shape's run-time
  // distribution from the jobs that finish and hand the ranks over in the Snapshot.
  bool gittins_ranks = false;
  sched::queue::GittinsOptions gittins;
  // With gittins_ranks: consecutive jobs of one shape often come from one user's sweep, and their
  // run times correlate. Once the job of the same shape submitted just before a job (its
  // predecessor) has finished, the job is ranked by the run times of jobs whose predecessor ran
  // as long to within an octave, falling back to its shape's while that class has too few.
  bool gittins_by_predecessor = false;
  // Queues with quotas and fair share (SimJob::queue names a leaf); null: one pool.
  std::shared_ptr<const sched::queue::QueueTree> queues;
  // ... and the specs it was built from (the controller engine applies them as `hangar apply`).
  std::vector<job::QueueSpec> queue_specs;
  // Fair share remembers each queue's usage with this half-life (0: current usage only).
  Duration share_half_life = 0;
  // Hand the scheduler the workload profile learned from the jobs that arrived so far, as the
  // controller does (sched/owner/workload.h), for the fgd and hangar scorers. Off by default:
  // the Philly figures in docs/ were measured without it.
  bool learn_profile = false;
  // Jobs' artifacts, node caches and transfers (staging.h); off: artifacts are ignored.
  StagingConfig staging;
  // MIG layouts, by global GPU index: a MIG GPU given one places tasks only into its
  // instances (the others make instances on demand, the ideal). With `mig_reshape` the cycle
  // re-cuts idle instances for the queue (sched/mig_reshape.h) and each reshape keeps its GPU
  // out of use for `mig_reshape_time`; without it the layouts are fixed.
  std::vector<cluster::MigLayout> mig_layouts;
  bool mig_reshape = true;
  Duration mig_reshape_time = 5 * kSecond;
};

// What MIG reshaping did over a run (SimConfig::mig_layouts).
struct MigReshapeStats {
  int64_t reshapes = 0;  // GPUs re-cut (one MigReshape each)
  int64_t instances_created = 0;
  int64_t instances_destroyed = 0;
};

// What happened, for golden tests and reports. All callbacks are optional.
struct SimObserver {
  std::function<void(Time, const SimJob&, const sched::Placement&)> on_start;
  std::function<void(Time, const SimJob&)> on_finish;
  std::function<void(Time, const SimJob&, const sched::Verdict&)>
      on_wait;  // when the reason changes
  std::function<void(Time, const SimJob&, const sched::Preemption&)> on_preempt;
  // After each cycle: allocated milli-GPU and pending jobs.
  std::function<void(Time, int64_t allocated_milli, size_t pending)> on_cycle;
};

class Engine {
 public:
  virtual ~Engine() = default;
  // Jobs may be added in any order before Run(). A job submitted at kNever is held back: it
  // arrives only when a Disruptor submits it (SimControl::Submit), which engines without a
  // Disruptor never do.
  virtual void AddJob(SimJob job) = 0;
  virtual void set_observer(SimObserver o) = 0;
  // Runs until every job has finished or is known never to fit.
  virtual Status Run() = 0;
  virtual const std::vector<SimJob>& jobs() const = 0;
  virtual const std::vector<SimJobResult>& results() const = 0;
  virtual int64_t cycles() const = 0;
  // GPU-milliseconds allocated over the run.
  virtual int64_t busy_gpu_ms() const = 0;
  // With queues: GPU-milliseconds each queue (tree index; groups include their children) held.
  virtual const std::vector<int64_t>& queue_gpu_ms() const = 0;
  // With SimConfig::staging: what staging cost. Engines without a staging model report nothing.
  virtual StagingStats staging_stats() const { return {}; }
  // With SimConfig::mig_layouts: what reshaping did.
  virtual MigReshapeStats mig_stats() const { return {}; }
};

// Makes an engine for one cluster (partition); the replay calls it once per partition.
using EngineFactory = std::function<StatusOr<std::unique_ptr<Engine>>(
    std::shared_ptr<const cluster::Topology>, const SimConfig&)>;

}  // namespace hangar::sim
