// Time-based replay of a trace through the production scheduler, whole cluster or one simulator
// per partition (Philly's virtual clusters), with the metrics platform teams compare schedulers
// by: job completion time, queueing time, slowdown, utilisation.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cluster/topology.h"
#include "sched/scheduler.h"
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
};
StatusOr<ReplayPolicy> MakeReplayPolicy(const std::string& name);
const std::vector<std::string>& ReplayPolicyNames();

struct ReplayOptions {
  ReplayPolicy policy;
  Duration restore_cost = 30 * kSecond;
  double load = 1.0;                // arrival gaps divided by this
  std::optional<Time> from, to;     // select jobs by submit day, both days included
  int threads = 2;                  // partitions replay in parallel
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
};

struct UsageSample {
  Time t = 0;
  double gpu_util_pct = 0;  // allocated / all GPUs, averaged over the bucket
  double pending = 0;       // jobs waiting at the end of the bucket
};

struct ReplayResult {
  std::vector<JobOutcome> done;   // jobs that ran to completion
  int64_t never = 0;              // jobs that could never fit their partition
  int64_t no_partition = 0;       // jobs of a partition that is not in the cluster
  int64_t cycles = 0;
  int64_t total_gpus = 0;
  int64_t busy_gpu_ms = 0;
  Time first_submit = 0, last_end = 0;
  double wall_s = 0;
  std::vector<UsageSample> timeline;
};

// Selects (--from/--to), compresses (--load) and replays `jobs`. A job goes to the partition
// named by its `partition`; with a single unnamed partition every job goes there.
StatusOr<ReplayResult> RunReplay(std::vector<TraceJob> jobs,
                                 const std::vector<ClusterPartition>& partitions,
                                 const ReplayOptions& options);

// A cluster of `nodes` 8-GPU nodes under one leaf (a Philly virtual cluster).
std::shared_ptr<const cluster::Topology> UniformCluster(const std::string& name, int nodes,
                                                        int gpus_per_node = 8);

// The metrics: jobs, avg/p50/p99 JCT, avg/p99 queueing, makespan, GPU utilisation, slowdown.
nlohmann::json ReplayMetrics(const ReplayResult& r);

}  // namespace hangar::sim
