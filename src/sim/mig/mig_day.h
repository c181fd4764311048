// A day of MIG demand through the production scheduler: the best static layout we can
// find against queue-driven reshaping (sched/mig_reshape.h), on the lean simulator.
//
// The demand comes from the openb GPU-sharing pods (Alibaba, cluster-trace-gpu-v2023): each pod
// with 0 < gpu_milli < 1000 asks for that share of one GPU, which on an H100-80GB becomes the
// smallest MIG profile whose compute and memory both hold it:
//   gpu_milli <= 125 -> 1g.10gb   <= 142 -> 1g.20gb   <= 285 -> 2g.20gb
//   <= 428 -> 3g.40gb             <= 500 -> 4g.40gb   else  -> 7g.80gb
// (compute slices / 7 and memory slices / 8 of the GPU, e.g. 2g.20gb holds 2/7 = 0.285 of the
// compute and 2/8 of the memory). Its run time is its own (deletion - scheduled), clipped to
// [60 s, 4 h].
//
// The day's mix shifts: arrivals are Poisson over 24 h, and an arrival at time t draws a small
// pod (1g or 2g) with probability 0.5 + 0.4 sin(2 pi t / 24 h), otherwise a large one (3g, 4g or
// 7g), uniformly from that pool (seeded). The rate is set so the offered compute (slices x run
// time) is `load` of the cluster's over the day.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cluster/mig_geometry.h"
#include "cluster/topology.h"
#include "common/status.h"
#include "common/time.h"
#include "sim/engine/engine.h"

namespace hangar::sim::mig {

struct MigPod {
  cluster::MigShape shape;
  Duration runtime;
};

// The MIG shape for an openb pod's gpu_milli (the table above).
cluster::MigShape ShapeForGpuMilli(int gpu_milli);
// The GPU-sharing pods of openb pod-list CSVs (name,cpu_milli,memory_mib,num_gpu,gpu_milli,...).
StatusOr<std::vector<MigPod>> ReadSharingPods(const std::vector<std::string>& files);

struct MigDayConfig {
  int nodes = 8;  // x 8 H100-80GB in MIG mode
  double load = 0.9;
  Duration day = 24 * kHour;
  Duration reshape_time = 10 * kSecond;
  uint64_t seed = 1;
};

std::shared_ptr<const cluster::Topology> MigDayCluster(int nodes);
// The day's arrivals (SimJob ids from 1, in submit order).
std::vector<SimJob> DayOfDemand(const std::vector<MigPod>& pods, const cluster::Topology& topo,
                                const MigDayConfig& cfg);

// A static layout for every GPU in proportion to the demand: instances of each shape in the
// ratio of the day's mean concurrent demand for it (weighted by `power`: 1 = by instances,
// 0 = the same count of each; at least one of each shape asked for), packed onto GPUs largest
// first with the placer's start rule, and
// the slices left over cut into 1g.
std::vector<cluster::MigLayout> ProportionalLayout(const std::vector<SimJob>& jobs,
                                                   const cluster::Topology& topo, double power);

struct MigDayResult {
  double avg_wait_s = 0;
  double p99_wait_s = 0;
  double util = 0;  // compute slices busy over the day / slices in the cluster
  int64_t jobs = 0;
  int64_t never = 0;  // never placed (a static layout without their shape)
  MigReshapeStats reshape;
  std::string layout;  // the starting layout, summarised ("12 x 1g.10gb@6, ...")
};

StatusOr<MigDayResult> RunDay(std::shared_ptr<const cluster::Topology> topo,
                              const std::vector<SimJob>& jobs,
                              const std::vector<cluster::MigLayout>& layouts, bool reshape,
                              const MigDayConfig& cfg);

// The comparison `hangar sim mig` and bench/mig_reshape print: three demand-proportional static
// layouts (fixed all day; the best is the one that strands fewest jobs, then waits least),
// queue-driven reshaping from the best of them, and reshaping from empty GPUs. JSON with
// static_avg_wait_s, dynamic_avg_wait_s, static_p99_wait_s, dynamic_p99_wait_s, static_util,
// dynamic_util, reconfigurations, avg_wait_cut and the runs behind them.
StatusOr<nlohmann::json> CompareDay(const std::vector<MigPod>& pods, const MigDayConfig& cfg);
// CompareDay's answer as a table.
std::string FormatComparison(const nlohmann::json& c);
// The default demand: data/traces/openb's gpushare40 under `source_dir` (the checkout) when it is
// there, else ../shared/traces/openb's gpushare40, 60 and 80 from the working directory.
std::vector<std::string> DefaultPodFiles(const std::string& source_dir);

}  // namespace hangar::sim::mig
