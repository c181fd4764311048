// Traces for time-based replay: Hangar's own CSV format (docs/trace-format.md) and importers for
// the public traces as they are shipped (Microsoft Philly). Every reader reports a bad row as
// "file:line: what is wrong".
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"
#include "common/time.h"
#include "job/job_spec.h"
#include "sim/engine/staging.h"

namespace hangar::sim {

struct TraceJob {
  uint64_t row = 0;  // line in the file, the final tie-break
  Time submit = 0;   // ms (since the epoch, or since the trace's zero)
  Duration runtime = 0;
  int32_t replicas = 1;
  int32_t gpus_per_replica = 0;  // whole GPUs; 1 for a shared GPU
  int32_t milli_gpu = 1000;      // per GPU: 1000 whole, less for a share of one GPU
  std::vector<std::string> gpu_models;
  int64_t milli_cpu = 0;   // per replica
  int64_t memory_mib = 0;  // per replica
  std::string queue = "default";
  int32_t priority = 0;
  job::Tier tier = job::Tier::kGuaranteed;
  Duration time_limit = 0;             // 0: none
  std::string partition;               // Philly's virtual cluster
  std::vector<SimArtifact> artifacts;  // what it needs on its nodes (artifacts.h attaches them)
  job::NodeListSpec nodes;             // include_nodes / exclude_nodes (Hangar's format only)
};

StatusOr<std::vector<TraceJob>> ReadHangarTrace(const std::string& path);
// philly.csv: timestamp,duration,num_gpus,gpu_time,cluster. Jobs of more than 8 GPUs take whole
// 8-GPU nodes (ceil(num_gpus / 8) replicas of 8).
StatusOr<std::vector<TraceJob>> ReadPhillyTrace(const std::string& path);
// The Philly trace shipped in the repository (run from the checkout), else the one beside it in
// ../shared: what `hangar sim goodput|services|windows` replay when no --trace is given.
std::string DefaultPhillyTrace();
// openb_pod_list_*.csv (Alibaba, cluster-trace-gpu-v2023; shapes read as `hangar sim fgd` reads
// them): one job per pod, submitted at creation_time and running deletion_time - scheduled_time
// (seconds from the trace's zero). A pod that shares a GPU (gpu_milli < 1000) takes that share of
// one GPU; gpu_spec becomes the allowed models. Pods never scheduled (no scheduled_time, the
// `Pending` ones) never ran and are left out; qos is not used. The multigpu* files carry no times
// and are refused.
StatusOr<std::vector<TraceJob>> ReadOpenbTrace(const std::string& path);
// philly_vc_nodes.csv: vc,node num.
struct Partition {
  std::string name;
  int nodes = 0;
};
StatusOr<std::vector<Partition>> ReadPhillyPartitions(const std::string& path);

// Parses "42-51" or "42,43,50" (used by the simulator commands for seeds).
StatusOr<std::vector<uint64_t>> ParseSeedList(const std::string& text);

}  // namespace hangar::sim
