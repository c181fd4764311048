#include "sim/windows/windows_run.h"

#include <algorithm>
#include <cmath>

#include "sim/engine/simulator.h"
#include "sim/replay/replay.h"

namespace hangar::sim {

std::shared_ptr<const cluster::Topology> WindowsCluster(const WindowsScenario& s) {
  return UniformCluster("", s.nodes, s.gpus_per_node);
}

namespace {

double Percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const auto rank = static_cast<size_t>(std::ceil(p * static_cast<double>(v.size())));
  return v[std::clamp<size_t>(rank, 1, v.size()) - 1];
}

// Adds the jobs that fit the pool; returns their submits.
std::vector<Time> AddJobs(const WindowsScenario& s, const ReplayPolicy& policy,
                          const cluster::Topology& topo, Simulator* sim, int64_t* too_big) {
  std::vector<Time> submit;
  const Time trace_to = s.from + static_cast<Time>(static_cast<double>(s.span) * s.load);
  for (const TraceJob& t : s.trace) {
    if (t.submit < s.from || t.submit >= trace_to) continue;
    if (int64_t{t.replicas} * t.gpus_per_replica > topo.total_gpus() ||
        t.gpus_per_replica > s.gpus_per_node) {
      ++*too_big;
      continue;
    }
    SimJob j;
    j.id = submit.size() + 1;
    j.name = "job-" + std::to_string(t.row);
    j.request = RequestFor(t, topo);
    j.submit = s.from + static_cast<Time>(static_cast<double>(t.submit - s.from) / s.load);
    j.runtime = t.runtime;
    j.time_limit = policy.knows_runtime ? std::max<Duration>(t.runtime, 1) : t.time_limit;
    j.priority = t.priority;
    j.seq = t.row;
    submit.push_back(j.submit);
    sim->AddJob(std::move(j));
  }
  return submit;
}

}  // namespace

StatusOr<WindowsRun> RunWindows(const WindowsScenario& s, WindowNotice notice,
                                std::shared_ptr<const cluster::Topology> topology) {
  const int64_t t0 = MonotonicNanos();
  if (!(s.load > 0)) return Status::InvalidArgument("--load must be above 0");
  HANGAR_ASSIGN_OR_RETURN(ReplayPolicy policy, MakeReplayPolicy(s.policy));
  SimConfig cfg;
  cfg.scheduler = policy.scheduler;
  cfg.restore_cost = s.keeper.restore;
  cfg.gittins_ranks = policy.gittins_ranks;
  cfg.gittins_by_predecessor = policy.gittins_by_predecessor;
  HANGAR_ASSIGN_OR_RETURN(auto sim, Simulator::Create(topology, cfg));
  WindowsRun out;
  out.notice = notice;
  const std::vector<Time> submit = AddJobs(s, policy, *topology, sim.get(), &out.too_big);
  WindowKeeperConfig kc = s.keeper;
  kc.notice = notice;
  kc.not_before = s.from;
  WindowKeeper keeper(std::move(kc), *topology);
  sim->set_disruptor(&keeper);
  HANGAR_RETURN_IF_ERROR(sim->Run());
  std::vector<double> jct;
  for (size_t i = 0; i < submit.size(); ++i) {
    const Time end = sim->results()[i].end;
    out.ends.push_back(end);
    if (end != kNever) jct.push_back(static_cast<double>(end - submit[i]) / kSecond);
  }
  out.jobs = static_cast<int64_t>(submit.size());
  double sum = 0;
  for (double x : jct) sum += x;
  out.mean_jct_s = jct.empty() ? 0 : sum / static_cast<double>(jct.size());
  out.p50_jct_s = Percentile(jct, 0.5);
  out.p95_jct_s = Percentile(jct, 0.95);
  out.ledgers = keeper.ledgers();
  out.wall_s = static_cast<double>(MonotonicNanos() - t0) / 1e9;
  return out;
}

nlohmann::json WindowsJson(const WindowsRun& run, const WindowsRun& baseline,
                           const WindowsScenario& s) {
  int64_t delayed = 0;
  double delay_s = 0;
  for (size_t i = 0; i < run.ends.size() && i < baseline.ends.size(); ++i) {
    if (run.ends[i] == kNever || baseline.ends[i] == kNever) continue;
    const Duration d = run.ends[i] - baseline.ends[i];
    if (d > kMinute) {
      ++delayed;
      delay_s += static_cast<double>(d) / kSecond;
    }
  }
  nlohmann::json windows = nlohmann::json::array();
  for (size_t w = 0; w < run.ledgers.size(); ++w) {
    const WindowLedger& l = run.ledgers[w];
    const WindowLedger& b = baseline.ledgers[w];
    windows.push_back({{"name", s.keeper.windows[w].name},
                       {"idle_gpu_hours_before", l.idle_gpu_s_before / 3600},
                       {"idle_gpu_hours_before_beyond_baseline",
                        (l.idle_gpu_s_before - b.idle_gpu_s_before) / 3600},
                       {"gpu_hours_out", l.out_gpu_s / 3600},
                       {"jobs_requeued", l.requeued},
                       {"gpu_hours_lost", l.lost_gpu_s / 3600}});
  }
  return {{"notice", WindowNoticeName(run.notice)},
          {"jobs", run.jobs},
          {"mean_jct_s", run.mean_jct_s},
          {"p50_jct_s", run.p50_jct_s},
          {"p95_jct_s", run.p95_jct_s},
          {"jobs_delayed", delayed},
          {"job_hours_delayed", delay_s / 3600},
          {"windows", windows},
          {"sim_wall_s", run.wall_s}};
}

}  // namespace hangar::sim
