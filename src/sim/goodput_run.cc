#include "sim/goodput_run.h"

#include <algorithm>
#include <cmath>

#include "common/time.h"
#include "sim/engine/simulator.h"
#include "sim/replay/replay.h"

namespace hangar::sim {

StatusOr<std::shared_ptr<const cluster::Topology>> GoodputCluster(const GoodputScenario& s) {
  if (s.gpus_per_node <= 0 || s.job_gpus <= 0 || s.job_gpus % s.gpus_per_node != 0) {
    return Status::InvalidArgument("the training job's GPUs (" + std::to_string(s.job_gpus) +
                                   ") must be a positive multiple of the GPUs per node (" +
                                   std::to_string(s.gpus_per_node) + ")");
  }
  if (s.trace_nodes < 0 || s.spares < 0 || s.nodes_per_leaf <= 0 || s.leaves_per_spine <= 0) {
    return Status::InvalidArgument("node, spare, leaf and spine counts must be positive");
  }
  const int nodes = s.job_gpus / s.gpus_per_node + s.trace_nodes + s.spares;
  cluster::TopologyBuilder b("goodput");
  for (int i = 0; i < nodes; ++i) {
    cluster::NodeSpec n;
    const int leaf = i / s.nodes_per_leaf;
    n.name = "node-" + std::to_string(i);
    n.leaf = "leaf-" + std::to_string(leaf);
    n.spine = "spine-" + std::to_string(leaf / s.leaves_per_spine);
    n.gpus = s.gpus_per_node;
    n.gpu_model = "H100";
    n.gpu_memory_mib = 80 * 1024;
    n.milli_cpu = 128000;
    n.memory_mib = 2048 * 1024;
    b.AddNode(std::move(n));
  }
  return std::move(b).Build();
}

std::vector<uint32_t> SparePositions(const cluster::Topology& topo, int count) {
  std::vector<uint32_t> out;
  const size_t leaves = topo.leaves().size();
  std::vector<uint32_t> taken(leaves, 0);
  for (int k = 0; k < count && leaves > 0; ++k) {
    const size_t leaf = static_cast<size_t>(k) * leaves / static_cast<size_t>(count);
    const auto& d = topo.leaves()[leaf];
    if (d.end_node - d.first_node <= taken[leaf]) continue;  // a leaf all spares
    out.push_back(d.end_node - 1 - taken[leaf]++);
  }
  std::sort(out.begin(), out.end());
  return out;
}

double JobInterruptionsPerHour(const GoodputScenario& s) {
  return s.loop.rates.InterruptionsPerGpuHour() * s.job_gpus;
}

namespace {

double Percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const auto rank = static_cast<size_t>(std::ceil(p * static_cast<double>(v.size())));
  return v[std::clamp<size_t>(rank, 1, v.size()) - 1];
}

SimJob TrainingJob(const GoodputScenario& s, bool knows_runtime) {
  sched::TaskShape shape;
  shape.kind = job::GpuKind::kWhole;
  shape.gpus = s.gpus_per_node;
  shape.milli = 1000;
  SimJob j;
  j.id = 1;
  j.name = "training";
  j.request = std::make_shared<sched::GangRequest>(
      sched::MakeSingleTaskRequest(shape, s.job_gpus / s.gpus_per_node, s.rule));
  j.submit = s.start;
  j.runtime = s.work;
  j.time_limit = knows_runtime ? s.work : 0;
  return j;
}

}  // namespace

StatusOr<GoodputOutcome> RunGoodput(const GoodputScenario& s,
                                    std::shared_ptr<const cluster::Topology> topo) {
  const int64_t t0 = MonotonicNanos();
  HANGAR_ASSIGN_OR_RETURN(ReplayPolicy policy, MakeReplayPolicy(s.queue_policy));
  SimConfig cfg;
  cfg.scheduler = policy.scheduler;
  cfg.restore_cost = s.loop.other_restore;
  cfg.seed = s.loop.seed;
  cfg.gittins_ranks = policy.gittins_ranks;
  cfg.gittins_by_predecessor = policy.gittins_by_predecessor;
  HANGAR_ASSIGN_OR_RETURN(auto sim, Simulator::Create(topo, cfg));
  sim->AddJob(TrainingJob(s, policy.knows_runtime));
  std::vector<Time> submit = {s.start};  // by job index; the engine's own may move (a resubmission)
  for (const TraceJob& t : s.trace) {
    if (t.submit < s.start || t.submit >= s.start + s.work) continue;
    SimJob j;
    j.id = submit.size() + 1;
    j.name = "trace-" + std::to_string(t.row);
    j.request = RequestFor(t, *topo);
    j.submit = t.submit;
    j.runtime = t.runtime;
    j.time_limit = policy.knows_runtime ? std::max<Duration>(t.runtime, 1) : t.time_limit;
    j.priority = t.priority;
    j.seq = t.row;
    submit.push_back(t.submit);
    sim->AddJob(std::move(j));
  }
  GoodputLoopConfig loop = s.loop;
  if (loop.policy == RecoveryPolicy::kSpares) loop.spares = SparePositions(*topo, s.spares);
  GoodputLoop goodput(loop, *topo, 0, s.work, s.rule, s.start);
  SimObserver obs;
  obs.on_start = [&](Time t, const SimJob& j, const sched::Placement& p) {
    goodput.OnStart(t, j.id - 1, p.assignment);
  };
  obs.on_finish = [&](Time t, const SimJob& j) { goodput.OnFinish(t, j.id - 1); };
  sim->set_observer(std::move(obs));
  sim->set_disruptor(&goodput);
  HANGAR_RETURN_IF_ERROR(sim->Run());

  GoodputOutcome out;
  out.ledger = goodput.ledger();
  out.counts = goodput.counts();
  out.job_end = goodput.job_end();
  std::vector<double> jct;
  const auto& results = sim->results();
  for (size_t i = 1; i < results.size(); ++i) {
    if (results[i].end != kNever)
      jct.push_back(static_cast<double>(results[i].end - submit[i]) / 1000.0);
  }
  out.other_jobs = static_cast<int64_t>(jct.size());
  double sum = 0;
  for (double x : jct) sum += x;
  out.avg_jct_s = jct.empty() ? 0 : sum / static_cast<double>(jct.size());
  out.p50_jct_s = Percentile(jct, 0.5);
  out.p99_jct_s = Percentile(jct, 0.99);
  out.wall_s = static_cast<double>(MonotonicNanos() - t0) / 1e9;
  return out;
}

double SameFailuresBound(const GoodputOutcome& run, Duration checkpoint_interval,
                         Duration restore) {
  const Duration wall = run.job_end - run.ledger.first_start();
  if (run.job_end == kNever || wall <= 0) return 0;
  const double per_hour = run.ledger.interruptions() / (static_cast<double>(wall) / kHour);
  return BoundEttr(per_hour, checkpoint_interval, restore);
}

nlohmann::json PolicyJson(const std::vector<GoodputOutcome>& runs, const GoodputScenario& s) {
  const int job_gpus = s.job_gpus;
  nlohmann::json j;
  double n = static_cast<double>(std::max<size_t>(runs.size(), 1));
  auto mean = [&](auto f) {
    double sum = 0;
    for (const auto& r : runs) sum += f(r);
    return sum / n;
  };
  auto hours = [](Duration d) { return static_cast<double>(d) / kHour; };
  nlohmann::json by_seed = nlohmann::json::array();
  for (const auto& r : runs) by_seed.push_back(r.ledger.Ettr(r.job_end));
  j["ettr"] = mean([](const GoodputOutcome& r) { return r.ledger.Ettr(r.job_end); });
  j["ettr_by_seed"] = by_seed;
  j["bound_ettr_same_failures"] = mean([&](const GoodputOutcome& r) {
    return SameFailuresBound(r, s.loop.checkpoint_interval, s.loop.restore);
  });
  j["job_wall_days"] = mean([](const GoodputOutcome& r) {
    return static_cast<double>(r.job_end - r.ledger.first_start()) / kDay;
  });
  j["interruptions"] = mean([](const GoodputOutcome& r) { return r.ledger.interruptions(); });
  // Wall hours of the training job, by where they went (kept + the rest = its wall time).
  nlohmann::json lost;
  lost["lost_work"] = mean([&](const GoodputOutcome& r) { return hours(r.ledger.lost_work()); });
  lost["restore"] = mean([&](const GoodputOutcome& r) { return hours(r.ledger.restore()); });
  lost["slowdown"] = mean([&](const GoodputOutcome& r) { return hours(r.ledger.slowdown()); });
  for (int c = 0; c < kDownCauses; ++c) {
    lost[std::string(DownCauseName(static_cast<DownCause>(c)))] = mean(
        [&](const GoodputOutcome& r) { return hours(r.ledger.down(static_cast<DownCause>(c))); });
  }
  j["hours_lost"] = lost;
  nlohmann::json gpu_hours;
  for (auto it = lost.begin(); it != lost.end(); ++it)
    gpu_hours[it.key()] = it.value().get<double>() * job_gpus;
  j["gpu_hours_lost"] = gpu_hours;
  nlohmann::json events;
  for (int k = 0; k < kFailureKinds; ++k) {
    events[std::string(FailureKindName(static_cast<FailureKind>(k)))] =
        mean([&](const GoodputOutcome& r) { return r.counts.job_events[k]; });
  }
  j["job_failures_by_kind"] = events;
  j["spares_taken"] = mean([](const GoodputOutcome& r) { return r.counts.spares_taken; });
  j["spare_evictions"] = mean([](const GoodputOutcome& r) { return r.counts.spare_evictions; });
  j["free_nodes_taken"] = mean([](const GoodputOutcome& r) { return r.counts.free_nodes_taken; });
  j["waits_for_node"] = mean([](const GoodputOutcome& r) { return r.counts.waits; });
  j["other_jobs"] = {
      {"jobs", mean([](const GoodputOutcome& r) { return static_cast<double>(r.other_jobs); })},
      {"avg_jct_s", mean([](const GoodputOutcome& r) { return r.avg_jct_s; })},
      {"p50_jct_s", mean([](const GoodputOutcome& r) { return r.p50_jct_s; })},
      {"p99_jct_s", mean([](const GoodputOutcome& r) { return r.p99_jct_s; })},
      {"interruptions",
       mean([](const GoodputOutcome& r) { return r.counts.other_interruptions; })}};
  j["sim_wall_s"] = mean([](const GoodputOutcome& r) { return r.wall_s; });
  return j;
}

}  // namespace hangar::sim
