// One run of `hangar sim goodput` (docs/goodput.md): a cluster that holds one large training job
// and the jobs of a trace, failures drawn at the given rates, one recovery policy, the same
// production scheduler (Scheduler::Cycle, through the lean Simulator) placing every job.
#pragma once

#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cluster/topology.h"
#include "common/status.h"
#include "sim/goodput.h"
#include "sim/goodput_loop.h"
#include "sim/replay/trace.h"

namespace hangar::sim {

struct GoodputScenario {
  // The other jobs: those submitted while the training job would run without failures
  // ([start, start + work)).
  std::vector<TraceJob> trace;
  Time start = 0;                // the training job's submission, and when failures begin
  int job_gpus = 16384;          // the training job: whole nodes of gpus_per_node
  Duration work = 30 * kDay;     // its run time without failures
  job::TopologyConstraint rule;  // its topology rule
  int trace_nodes = 64;          // nodes besides the training job's and the spares
  int spares = 16;  // spare nodes under the spares policy; other nodes under the others
  int gpus_per_node = 8;
  int nodes_per_leaf = 32;
  int leaves_per_spine = 16;
  std::string queue_policy = "fifo-backfill";  // a `hangar sim replay` policy
  GoodputLoopConfig loop;  // its policy, checkpoint interval and seed name the run
};

// Nodes in fabric order: leaves of nodes_per_leaf, spines of leaves_per_spine.
StatusOr<std::shared_ptr<const cluster::Topology>> GoodputCluster(const GoodputScenario& s);
// `count` spare nodes spread evenly over the leaves, each taken from its leaf's end.
std::vector<uint32_t> SparePositions(const cluster::Topology& topo, int count);

struct GoodputOutcome {
  TrainingLedger ledger{0, 1};
  GoodputCounts counts;
  Time job_end = kNever;
  int64_t other_jobs = 0;  // trace jobs that finished
  double avg_jct_s = 0, p50_jct_s = 0, p99_jct_s = 0;
  double wall_s = 0;
};

StatusOr<GoodputOutcome> RunGoodput(const GoodputScenario& s,
                                    std::shared_ptr<const cluster::Topology> topo);

// The training job's interruptions per hour (its GPUs times the interrupting rates).
double JobInterruptionsPerHour(const GoodputScenario& s);

// The bound (BoundEttr) at the rate the run's training job met: its interruptions over its wall
// time. Its policy's ETTR minus this is what recovery cost beyond the bound on the same failures.
double SameFailuresBound(const GoodputOutcome& run, Duration checkpoint_interval, Duration restore);

// One policy's figures, averaged over its runs (one per seed); ETTR as a fraction of 1.
nlohmann::json PolicyJson(const std::vector<GoodputOutcome>& runs, const GoodputScenario& s);

}  // namespace hangar::sim
