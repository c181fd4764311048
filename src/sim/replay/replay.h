// Time-based replay of a trace through the production scheduler, whole cluster or one simulator
// per partition (Philly's virtual clusters), or all partitions as queues of one shared pool, with
// the metrics platform teams compare schedulers by: job completion time, queueing time,
// slowdown, utilisation, and per partition (queue) whether it got its guarantee when it asked.
#pragma once

#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "cluster/topology.h"
#include "sched/scheduler.h"
#include "sim/engine/engine.h"
#include "sim/replay/artifacts.h"
#include "sim/replay/trace.h"

namespace hangar::sim {

// A replay policy: the scheduler configuration, and whether the scheduler may be told each job's
// true run time (as its time limit). Names: fifo, fifo-backfill, sjf-oracle, las, hangar.
struct ReplayPolicy {
  std::string name;
  sched::SchedulerConfig scheduler;
  bool knows_runtime = false;
  // The simulator learns run-time distributions online and ranks jobs by them (queue/gittins.h).
  bool gittins_ranks = false;
  // ... per shape and by how long the job's predecessor ran (SimConfig::gittins_by_predecessor).
  bool gittins_by_predecessor = false;
};
StatusOr<ReplayPolicy> MakeReplayPolicy(const std::string& name);
const std::vector<std::string>& ReplayPolicyNames();

struct ReplayOptions {
  ReplayPolicy policy;
  Duration restore_cost = 30 * kSecond;
  Duration preemption_grace = 0;  // SimConfig::preemption_grace
  double load = 1.0;              // arrival gaps divided by this
  std::optional<Time> from, to;   // select jobs by submit day, both days included
  int threads = 2;                // partitions replay in parallel
  // One cluster holding every partition's nodes instead of one simulator per partition: each
  // partition becomes a leaf queue with a guaranteed GPU quota equal to its GPUs (no borrowing
  // or lending limit, weight 1) and its jobs go to that queue. Needs named partitions.
  bool shared_pool = false;
  Duration share_half_life = 30 * kMinute;  // fair share's usage memory, with shared_pool
  // Makes the engine that replays each partition; null: the lean Simulator. `hangar sim replay
  // --engine controller` passes MakeControllerEngine (sim/controller/).
  EngineFactory engine;
  // With staging.enabled: jobs get artifacts by `artifacts` (artifacts.h) and the lean engine
  // stages them (sim/engine/staging.h, docs/sim-staging.md).
  StagingConfig staging;
  ArtifactRule artifacts;
};

struct ClusterPartition {
  std::string name;  // "" for a whole cluster
  std::shared_ptr<const cluster::Topology> topology;
};

struct JobOutcome {
  Time submit = 0;
  Time start = kNever;
  Time end = kNever;
  Duration runtime = 0;
  int64_t gpus_milli = 0;
  int preemptions = 0;
  uint32_t partition = 0;
  Duration staging = 0;  // GPUs held waiting for its objects
};

// Per partition (a queue of the shared pool, or a static partition): what it was guaranteed,
// what it received, and whether it got its guarantee when it asked. Two measures:
//  - A job *asks within its guarantee* when, at its submission, the GPUs its queue holds plus the
//    GPUs of the queue's jobs already waiting plus its own are at most the guarantee. Such a job
//    is owed a start in that cycle; `within_late` counts those that started later, and
//    `within_wait_*` their waits.
//  - After each scheduling cycle the queue is *denied* when it has a waiting job that would fit
//    within its guarantee (GPUs held + that job's GPUs <= guarantee) while another queue holds
//    more than its own guarantee (borrows). `denied_cycles` counts such cycles, `denied_ms` the
//    simulated time until the next cycle. Static partitions never lend, so this stays 0 there.
//  - Over time, the queue's *entitlement* is its demand (GPUs held + GPUs of its waiting jobs)
//    up to its guarantee; `shortfall_gpu_ms` integrates the part of it the queue did not hold
//    (a waiting gang too big for the gap, fragmentation, a blocked head job, or borrowers not
//    preempted). The same measure on static partitions is the baseline: owning the nodes.
struct QueueOutcome {
  std::string name;
  int64_t guarantee_milli = 0;  // GPUs (milli)
  int64_t gpu_ms = 0;           // GPU-milliseconds its jobs held
  int64_t asked_within = 0;
  int64_t within_late = 0;
  Duration within_wait_max = 0;
  Duration within_wait_total = 0;
  int64_t denied_cycles = 0;
  Duration denied_ms = 0;
  int64_t peak_borrowed_milli = 0;  // most GPUs it held beyond its guarantee at a cycle's end
  int64_t entitled_gpu_ms = 0;
  int64_t shortfall_gpu_ms = 0;
};

struct UsageSample {
  Time t = 0;
  double gpu_util_pct = 0;  // allocated / all GPUs, averaged over the bucket
  double pending = 0;       // jobs waiting at the end of the bucket
};

struct ReplayResult {
  std::vector<JobOutcome> done;  // jobs that ran to completion
  int64_t never = 0;             // jobs that could never fit their partition
  int64_t no_partition = 0;      // jobs of a partition that is not in the cluster
  int64_t cycles = 0;
  int64_t total_gpus = 0;
  int64_t busy_gpu_ms = 0;
  Time first_submit = 0, last_end = 0;
  double wall_s = 0;
  std::vector<UsageSample> timeline;
  bool shared_pool = false;
  std::vector<QueueOutcome> queues;  // by partition index
  // With ReplayOptions::staging: its settings, what it cost, and the catalogue the rule built.
  StagingConfig staging;
  StagingStats staging_stats;
  int64_t staging_objects = 0, staging_catalogue_bytes = 0;
};

// Selects (--from/--to), compresses (--load) and replays `jobs`. A job goes to the partition
// named by its `partition`; with a single unnamed partition every job goes there.
StatusOr<ReplayResult> RunReplay(std::vector<TraceJob> jobs,
                                 const std::vector<ClusterPartition>& partitions,
                                 const ReplayOptions& options);

// What a trace job asks the scheduler for on `t`.
std::shared_ptr<const sched::GangRequest> RequestFor(const TraceJob& j, const cluster::Topology& t);

// A cluster of `nodes` 8-GPU nodes under one leaf (a Philly virtual cluster).
std::shared_ptr<const cluster::Topology> UniformCluster(const std::string& name, int nodes,
                                                        int gpus_per_node = 8);

// openb_node_list_gpu_node.csv as a cluster (nodes as `hangar sim fgd` builds them).
StatusOr<std::shared_ptr<const cluster::Topology>> ReadOpenbCluster(const std::string& path);

// One topology with the nodes of every partition (names must be unique), fabric as declared.
StatusOr<std::shared_ptr<const cluster::Topology>> PoolOf(
    const std::vector<ClusterPartition>& partitions);

// The metrics: jobs, avg/p50/p99 JCT, avg/p99 queueing, makespan, GPU utilisation, slowdown,
// mean run time (the no-queueing bound on average JCT), and `queues`: one entry per partition.
// With staging, also `staging`: StagingMetrics.
nlohmann::json ReplayMetrics(const ReplayResult& r);
// What staging cost: GPU-hours lost, staged starts and their waits, bytes from origin and peers.
nlohmann::json StagingMetrics(const ReplayResult& r);

}  // namespace hangar::sim
