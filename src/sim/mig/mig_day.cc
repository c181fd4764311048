#include "sim/mig/mig_day.h"

#include <algorithm>
#include <cmath>
#include <numbers>
#include <unordered_map>

#include "cluster/cluster_yaml.h"
#include "common/random.h"
#include "sched/request.h"
#include "sim/engine/simulator.h"
#include "sim/fgd/csv_rows.h"
#include "sim/fgd/openb_trace.h"

namespace hangar::sim::mig {

using cluster::kMigMemorySlices;
using cluster::kMigShapes;
using cluster::MigLayout;
using cluster::MigShape;

namespace {

constexpr Duration kMinRuntime = 60 * kSecond;
constexpr Duration kMaxRuntime = 4 * kHour;

bool Small(MigShape s) { return s <= MigShape::k2g; }

StatusOr<std::vector<MigPod>> ParseSharingPods(const std::string& text, const std::string& file) {
  fgd::CsvRows rows(text, file);
  HANGAR_RETURN_IF_ERROR(rows.ReadHeader({"gpu_milli", "scheduled_time", "deletion_time"}));
  const size_t milli = *rows.Column("gpu_milli"), start = *rows.Column("scheduled_time"),
               end = *rows.Column("deletion_time");
  std::vector<MigPod> pods;
  while (true) {
    bool more = false;
    { HANGAR_ASSIGN_OR_RETURN(more, rows.Next()); }
    if (!more) break;
    int64_t m = 0;
    { HANGAR_ASSIGN_OR_RETURN(m, rows.Int(milli, 0, 1000)); }
    if (m <= 0 || m >= 1000 || rows.Field(start).empty() || rows.Field(end).empty()) continue;
    int64_t from = 0, to = 0;
    { HANGAR_ASSIGN_OR_RETURN(from, rows.Int(start, 0, INT64_MAX / kSecond)); }
    { HANGAR_ASSIGN_OR_RETURN(to, rows.Int(end, 0, INT64_MAX / kSecond)); }
    pods.push_back({ShapeForGpuMilli(static_cast<int>(m)),
                    std::clamp((to - from) * kSecond, kMinRuntime, kMaxRuntime)});
  }
  return pods;
}

std::shared_ptr<const sched::GangRequest> RequestFor(MigShape shape,
                                                     const cluster::Topology& topo) {
  const uint8_t part = topo.gpus()[0].mig_part;
  sched::TaskShape s;
  s.SetMigProfile(cluster::MigPartAt(part).profiles[static_cast<int>(shape)],
                  cluster::ShapeInfo(shape).compute_slices, 0);
  return std::make_shared<sched::GangRequest>(sched::MakeSingleTaskRequest(s));
}

}  // namespace

MigShape ShapeForGpuMilli(int gpu_milli) {
  if (gpu_milli <= 125) return MigShape::k1g;
  if (gpu_milli <= 142) return MigShape::k1gDouble;
  if (gpu_milli <= 285) return MigShape::k2g;
  if (gpu_milli <= 428) return MigShape::k3g;
  if (gpu_milli <= 500) return MigShape::k4g;
  return MigShape::k7g;
}

StatusOr<std::vector<MigPod>> ReadSharingPods(const std::vector<std::string>& files) {
  std::vector<MigPod> all;
  for (const std::string& f : files) {
    std::string text;
    { HANGAR_ASSIGN_OR_RETURN(text, fgd::ReadTextFile(f, "openb pod list")); }
    std::vector<MigPod> pods;
    { HANGAR_ASSIGN_OR_RETURN(pods, ParseSharingPods(text, f)); }
    all.insert(all.end(), pods.begin(), pods.end());
  }
  if (all.empty())
    return Status::InvalidArgument("no GPU-sharing pods (0 < gpu_milli < 1000) in the pod lists");
  return all;
}

std::shared_ptr<const cluster::Topology> MigDayCluster(int nodes) {
  auto f = cluster::ParseClusterYaml(
      "name: mig-day\nnode_defaults: {gpus: 8, gpu_model: H100-SXM-80GB, gpu_memory: 80Gi, cpu: "
      "192, "
      "memory: 2Ti, mig: true}\nnodes:\n" +
          [&] {
            std::string s;
            for (int n = 0; n < nodes; ++n) s += "  - {name: m" + std::to_string(n) + "}\n";
            return s;
          }(),
      "generated");
  return f.ok() ? f->topology : nullptr;
}

std::vector<SimJob> DayOfDemand(const std::vector<MigPod>& pods, const cluster::Topology& topo,
                                const MigDayConfig& cfg) {
  std::vector<const MigPod*> pools[2];  // small, large
  double mean_work[2] = {0, 0};         // slice-ms per pod
  for (const MigPod& p : pods) {
    pools[Small(p.shape) ? 0 : 1].push_back(&p);
    mean_work[Small(p.shape) ? 0 : 1] +=
        double(cluster::ShapeInfo(p.shape).compute_slices) * p.runtime;
  }
  for (int k = 0; k < 2; ++k) mean_work[k] = pools[k].empty() ? 0 : mean_work[k] / pools[k].size();
  if (pools[0].empty()) pools[0] = pools[1];
  if (pools[1].empty()) pools[1] = pools[0];
  const double slices = double(topo.gpus().size()) * cluster::kMigComputeSlices;
  // Over the day the two pools are drawn half and half on average.
  const double per_arrival = 0.5 * mean_work[0] + 0.5 * mean_work[1];
  const double rate = cfg.load * slices / per_arrival;  // arrivals per ms
  std::shared_ptr<const sched::GangRequest> requests[kMigShapes];
  for (int k = 0; k < kMigShapes; ++k) requests[k] = RequestFor(static_cast<MigShape>(k), topo);
  Random rng(cfg.seed);
  std::vector<SimJob> jobs;
  double t = 0;
  while (true) {
    t += -std::log(1.0 - rng.UniformDouble()) / rate;
    if (t >= double(cfg.day)) break;
    const double small = 0.5 + 0.4 * std::sin(2 * std::numbers::pi * t / double(cfg.day));
    const auto& pool = pools[rng.UniformDouble() < small ? 0 : 1];
    const MigPod& pod = *pool[rng.Uniform(pool.size())];
    SimJob j;
    j.id = jobs.size() + 1;
    j.seq = j.id;
    j.submit = static_cast<Time>(t);
    j.runtime = pod.runtime;
    j.request = requests[static_cast<int>(pod.shape)];
    jobs.push_back(std::move(j));
  }
  return jobs;
}

namespace {

MigShape ShapeOf(const SimJob& j, const cluster::Topology& topo) {
  return static_cast<MigShape>(j.request->groups[0].shape.mig_shape[topo.gpus()[0].mig_part]);
}

// Places one instance of `shape` on the GPU where it costs the least layout value (the placer's
// rule); false when no GPU has room.
bool PackOne(std::vector<MigLayout>* gpus, MigShape shape) {
  int best = -1, best_start = -1;
  uint32_t best_lost = UINT32_MAX;
  for (size_t g = 0; g < gpus->size(); ++g) {
    const uint8_t m = (*gpus)[g].Mask();
    const int s = cluster::MigBestStart(m, shape);
    if (s < 0) continue;
    const uint32_t lost = cluster::MigLayoutValue(m) -
                          cluster::MigLayoutValue(m | cluster::MigPlacementMask(shape, s));
    if (lost < best_lost) best = static_cast<int>(g), best_start = s, best_lost = lost;
  }
  if (best < 0) return false;
  (*gpus)[best].Add(shape, best_start);
  return true;
}

}  // namespace

std::vector<MigLayout> ProportionalLayout(const std::vector<SimJob>& jobs,
                                          const cluster::Topology& topo, double power) {
  double concurrent[kMigShapes] = {};
  Time last = 1;
  for (const SimJob& j : jobs) {
    concurrent[static_cast<int>(ShapeOf(j, topo))] += double(j.runtime);
    last = std::max(last, j.submit);
  }
  double weight[kMigShapes], slices = 0;
  for (int k = 0; k < kMigShapes; ++k) {
    weight[k] = concurrent[k] > 0 ? std::pow(concurrent[k] / double(last), power) : 0;
    slices += weight[k] * cluster::ShapeInfo(static_cast<MigShape>(k)).memory_slices;
  }
  const double scale = slices > 0 ? double(topo.gpus().size()) * kMigMemorySlices / slices : 0;
  std::vector<MigLayout> gpus(topo.gpus().size());
  for (int k = kMigShapes - 1; k >= 0; --k) {  // largest first
    // Every shape the day asks for gets at least one home, so no job waits forever.
    const auto n =
        std::max<int64_t>(weight[k] > 0, static_cast<int64_t>(std::floor(weight[k] * scale)));
    for (int64_t i = 0; i < n && PackOne(&gpus, static_cast<MigShape>(k)); ++i) {
    }
  }
  while (PackOne(&gpus, MigShape::k1g)) {
  }
  return gpus;
}

namespace {

std::string Summary(const std::vector<MigLayout>& layouts, uint8_t part) {
  int count[kMigShapes] = {};
  for (const MigLayout& l : layouts) {
    for (uint8_t sh : l.shape_at) {
      if (sh != cluster::kNoMigShape) ++count[sh];
    }
  }
  std::string out;
  for (int k = kMigShapes - 1; k >= 0; --k) {
    if (count[k] == 0) continue;
    if (!out.empty()) out += ", ";
    out += std::to_string(count[k]) + " x " + std::string(cluster::MigPartAt(part).profiles[k]);
  }
  return out.empty() ? "empty" : out;
}

}  // namespace

StatusOr<MigDayResult> RunDay(std::shared_ptr<const cluster::Topology> topo,
                              const std::vector<SimJob>& jobs,
                              const std::vector<MigLayout>& layouts, bool reshape,
                              const MigDayConfig& cfg) {
  SimConfig sc;
  sc.scheduler.queue_policy = "fifo";
  sc.scheduler.placement_policy = "hangar";
  sc.mig_layouts = layouts;
  sc.mig_reshape = reshape;
  sc.mig_reshape_time = cfg.reshape_time;
  sc.seed = cfg.seed;
  std::unique_ptr<Simulator> sim;
  { HANGAR_ASSIGN_OR_RETURN(sim, Simulator::Create(topo, sc)); }
  // Busy compute slices over [0, day), from each job's start to its end.
  double busy_ms = 0;
  Time last = 0;
  int64_t held = 0;
  std::unordered_map<sched::JobId, int64_t> milli_of;
  auto advance = [&](Time now) {
    const Time t = std::min<Time>(now, cfg.day);
    if (t > last) busy_ms += double(held) * double(t - last);
    last = std::max(last, t);
  };
  SimObserver obs;
  obs.on_start = [&](Time now, const SimJob& j, const sched::Placement& p) {
    advance(now);
    const int64_t m = p.assignment.TotalMilliGpu(*topo);
    milli_of[j.id] = m;
    held += m;
  };
  obs.on_finish = [&](Time now, const SimJob& j) {
    advance(now);
    held -= milli_of[j.id];
  };
  sim->set_observer(std::move(obs));
  for (const SimJob& j : jobs) sim->AddJob(j);
  HANGAR_RETURN_IF_ERROR(sim->Run());
  if (last < cfg.day) busy_ms += double(held) * double(cfg.day - last);
  MigDayResult r;
  std::vector<double> waits;
  for (size_t i = 0; i < sim->jobs().size(); ++i) {
    const SimJobResult& res = sim->results()[i];
    if (res.never || res.first_start == kNever) {
      ++r.never;
      continue;
    }
    waits.push_back(double(res.first_start - sim->jobs()[i].submit) / kSecond);
  }
  r.jobs = static_cast<int64_t>(jobs.size());
  if (!waits.empty()) {
    double sum = 0;
    for (double w : waits) sum += w;
    r.avg_wait_s = sum / double(waits.size());
    std::sort(waits.begin(), waits.end());
    r.p99_wait_s =
        waits[std::min(waits.size() - 1, static_cast<size_t>(0.99 * double(waits.size())))];
  }
  r.util = busy_ms / (double(topo->gpus().size()) * cluster::kMilliPerGpu * double(cfg.day));
  r.reshape = sim->mig_stats();
  r.layout = Summary(layouts, topo->gpus()[0].mig_part);
  return r;
}

}  // namespace hangar::sim::mig
