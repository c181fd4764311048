#include "sim/services/services_run.h"

#include <algorithm>
#include <cmath>
#include <unordered_map>

#include "sched/queue/quota.h"
#include "sim/engine/simulator.h"
#include "sim/replay/replay.h"

namespace hangar::sim {

std::string_view FleetLayoutName(FleetLayout l) {
  return l == FleetLayout::kShared ? "shared" : "static";
}

namespace {

double Percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const auto rank = static_cast<size_t>(std::ceil(p * static_cast<double>(v.size())));
  return v[std::clamp<size_t>(rank, 1, v.size()) - 1];
}

// The fleet's whole nodes in the static layout.
int FleetNodes(const ServicesScenario& s) {
  return static_cast<int>((s.fleet.max_gpus() + s.gpus_per_node - 1) / s.gpus_per_node);
}

struct Layout {
  std::shared_ptr<const cluster::Topology> training_topo, fleet_topo;  // the same when shared
  std::shared_ptr<const sched::queue::QueueTree> tree;                 // shared only
  uint32_t training_queue = 0, fleet_queue = 0;
  int64_t fleet_gpus = 0, training_gpus = 0;
};

StatusOr<Layout> MakeLayout(const ServicesScenario& s, FleetLayout layout) {
  const int fleet_nodes = FleetNodes(s);
  if (s.fleet.gpus_per_replica > s.gpus_per_node) {
    return Status::InvalidArgument("a replica takes " + std::to_string(s.fleet.gpus_per_replica) +
                                   " GPUs, more than a node's " + std::to_string(s.gpus_per_node));
  }
  if (fleet_nodes >= s.nodes) {
    return Status::InvalidArgument("the fleet's " + std::to_string(s.fleet.max_replicas) +
                                   " replicas take " + std::to_string(fleet_nodes) +
                                   " nodes, leaving none of the " + std::to_string(s.nodes) +
                                   " for training; give more --nodes or fewer max_replicas");
  }
  Layout l;
  if (layout == FleetLayout::kStatic) {
    l.training_topo = UniformCluster("train", s.nodes - fleet_nodes, s.gpus_per_node);
    l.fleet_topo = UniformCluster("serve", fleet_nodes, s.gpus_per_node);
    l.fleet_gpus = int64_t{fleet_nodes} * s.gpus_per_node;
    l.training_gpus = int64_t{s.nodes - fleet_nodes} * s.gpus_per_node;
    return l;
  }
  l.training_topo = l.fleet_topo = UniformCluster("pool", s.nodes, s.gpus_per_node);
  l.fleet_gpus = s.fleet.max_gpus();
  l.training_gpus = int64_t{s.nodes} * s.gpus_per_node - l.fleet_gpus;
  job::QueueSpec serving, training;
  serving.name = "serving";
  serving.quota.gpus_milli = l.fleet_gpus * cluster::kMilliPerGpu;
  training.name = "training";
  training.quota.gpus_milli = l.training_gpus * cluster::kMilliPerGpu;
  HANGAR_ASSIGN_OR_RETURN(l.tree,
                          sched::queue::QueueTree::Build({serving, training}, *l.training_topo));
  l.fleet_queue = static_cast<uint32_t>(l.tree->FindLeaf("serving"));
  l.training_queue = static_cast<uint32_t>(l.tree->FindLeaf("training"));
  return l;
}

SimJob Replica(const ServingFleetSpec& f, int k, uint64_t id, uint32_t queue) {
  sched::TaskShape shape;
  shape.kind = job::GpuKind::kWhole;
  shape.gpus = f.gpus_per_replica;
  shape.milli = 1000;
  SimJob j;
  j.id = id;
  j.name = f.name + "-" + std::to_string(k);
  j.request = std::make_shared<sched::GangRequest>(sched::MakeSingleTaskRequest(shape));
  j.submit = kNever;  // held back until the fleet wants it
  j.runtime = kMaxDuration;
  j.priority = f.priority;
  j.queue = queue;
  j.tier = k < f.min_replicas || f.surge == SurgeTier::kReclaim ? job::Tier::kGuaranteed
                                                                : job::Tier::kOpportunistic;
  j.seq = id;
  return j;
}

// Training's share of one simulation: its jobs' results and what they held over the span.
struct TrainingBook {
  Time from = 0, to = 0;
  std::unordered_map<size_t, std::pair<Time, int64_t>> running;  // job -> (start, milli)
  double gpu_ms = 0;
  int64_t preemptions = 0;
  void Stop(Time now, size_t j) {
    auto it = running.find(j);
    if (it == running.end()) return;
    const Time a = std::max(it->second.first, from), b = std::min(now, to);
    if (b > a) gpu_ms += static_cast<double>(it->second.second) * static_cast<double>(b - a) / 1000;
    running.erase(it);
  }
};

// Where one run's observers send what happens: replicas' starts and preemptions to the fleet,
// training jobs' to their book, and the last training job's end to the fleet (shared layout).
struct Routing {
  ServingFleet* fleet;
  TrainingBook* book;
  const cluster::Topology* topo;
  size_t first_replica;  // on the fleet's side, jobs from this index on are replicas
  size_t training_left;
  bool shared;

  SimObserver For(bool fleet_side) {
    auto replica = [this, fleet_side](const SimJob& j) {
      return fleet_side && j.id > first_replica;
    };
    SimObserver obs;
    obs.on_start = [this, replica](Time t, const SimJob& j, const sched::Placement& p) {
      if (replica(j)) return fleet->OnStart(t, j.id - 1 - first_replica);
      book->running[j.id - 1] = {t, p.assignment.TotalMilliGpu(*topo)};
    };
    obs.on_preempt = [this, replica](Time t, const SimJob& j, const sched::Preemption& p) {
      if (replica(j)) return fleet->OnPreempt(t, j.id - 1 - first_replica);
      book->Stop(t, j.id - 1);
      if (shared && p.for_job > first_replica) book->preemptions++;
    };
    obs.on_finish = [this, replica](Time t, const SimJob& j) {
      if (replica(j)) return;
      book->Stop(t, j.id - 1);
      if (--training_left == 0 && shared) fleet->OthersDone();
    };
    return obs;
  }
};

SimConfig ConfigFor(const ServicesScenario& s, const ReplayPolicy& policy) {
  SimConfig cfg;
  cfg.scheduler = policy.scheduler;
  cfg.restore_cost = s.restore_cost;
  cfg.preemption_grace = s.preemption_grace;
  cfg.gittins_ranks = policy.gittins_ranks;
  cfg.gittins_by_predecessor = policy.gittins_by_predecessor;
  return cfg;
}

// Adds the training jobs (indices 0..) that fit training's partition; returns their submits.
std::vector<Time> AddTraining(const ServicesScenario& s, const ReplayPolicy& policy,
                              const Layout& l, Simulator* sim, TrainingFigures* fig) {
  std::vector<Time> submit;
  const Time trace_to = s.from + static_cast<Time>(static_cast<double>(s.span) * s.load);
  for (const TraceJob& t : s.trace) {
    if (t.submit < s.from || t.submit >= trace_to) continue;
    if (int64_t{t.replicas} * t.gpus_per_replica > l.training_gpus ||
        t.gpus_per_replica > s.gpus_per_node) {
      fig->too_big++;
      continue;
    }
    SimJob j;
    j.id = submit.size() + 1;
    j.name = "train-" + std::to_string(t.row);
    j.request = RequestFor(t, *l.training_topo);
    j.submit = s.from + static_cast<Time>(static_cast<double>(t.submit - s.from) / s.load);
    j.runtime = t.runtime;
    j.time_limit = policy.knows_runtime ? std::max<Duration>(t.runtime, 1) : t.time_limit;
    j.priority = t.priority;
    j.queue = l.training_queue;
    j.seq = t.row;
    submit.push_back(j.submit);
    sim->AddJob(std::move(j));
  }
  return submit;
}

void Summarise(const Simulator& sim, const std::vector<Time>& submit, TrainingFigures* fig) {
  std::vector<double> jct;
  double queue = 0;
  for (size_t i = 0; i < submit.size(); ++i) {
    const SimJobResult& r = sim.results()[i];
    if (r.end == kNever) {
      fig->unfinished++;
      continue;
    }
    jct.push_back(static_cast<double>(r.end - submit[i]) / kSecond);
    queue += static_cast<double>(r.first_start - submit[i]) / kSecond;
  }
  fig->jobs = static_cast<int64_t>(submit.size());
  double sum = 0;
  for (double x : jct) sum += x;
  const auto n = static_cast<double>(std::max<size_t>(jct.size(), 1));
  fig->mean_jct_s = sum / n;
  fig->mean_queue_s = queue / n;
  fig->p50_jct_s = Percentile(jct, 0.5);
  fig->p95_jct_s = Percentile(jct, 0.95);
}

}  // namespace

StatusOr<ServicesOutcome> RunServices(const ServicesScenario& s, FleetLayout layout) {
  const int64_t t0 = MonotonicNanos();
  if (!(s.load > 0)) return Status::InvalidArgument("--load must be above 0");
  if (s.span <= 0) return Status::InvalidArgument("--span must be above 0");
  HANGAR_ASSIGN_OR_RETURN(ReplayPolicy policy, MakeReplayPolicy(s.policy));
  HANGAR_ASSIGN_OR_RETURN(Layout l, MakeLayout(s, layout));
  ServicesOutcome out;
  out.layout = layout;
  out.fleet_gpus = l.fleet_gpus;
  out.training_gpus = l.training_gpus;
  SimConfig cfg = ConfigFor(s, policy);
  if (l.tree) {
    cfg.queues = l.tree;
    cfg.share_half_life = 0;
  }
  HANGAR_ASSIGN_OR_RETURN(auto sim, Simulator::Create(l.training_topo, cfg));
  std::unique_ptr<Simulator> fleet_sim;  // static: the fleet's own nodes
  if (layout == FleetLayout::kStatic) {
    HANGAR_ASSIGN_OR_RETURN(fleet_sim, Simulator::Create(l.fleet_topo, ConfigFor(s, policy)));
  }
  Simulator& serving = fleet_sim ? *fleet_sim : *sim;
  const std::vector<Time> submit = AddTraining(s, policy, l, sim.get(), &out.training);
  const size_t first_replica = fleet_sim ? 0 : submit.size();
  std::vector<size_t> replica_jobs;
  for (int k = 0; k < s.fleet.max_replicas; ++k) {
    replica_jobs.push_back(first_replica + static_cast<size_t>(k));
    serving.AddJob(Replica(s.fleet, k, first_replica + static_cast<size_t>(k) + 1, l.fleet_queue));
  }
  ServingFleet fleet(s.fleet, replica_jobs,
                     {s.from - s.lead, s.from, s.from + s.span, s.from + s.span + s.tail});
  TrainingBook book{s.from, s.from + s.span, {}, 0, 0};
  Routing routing{&fleet, &book, l.training_topo.get(), first_replica, submit.size(), !fleet_sim};
  sim->set_observer(routing.For(/*fleet_side=*/!fleet_sim));
  if (fleet_sim) {
    fleet_sim->set_observer(routing.For(/*fleet_side=*/true));
    fleet.OthersDone();  // the fleet's nodes hold nothing else
  } else if (submit.empty()) {
    fleet.OthersDone();
  }
  serving.set_disruptor(&fleet);
  HANGAR_RETURN_IF_ERROR(sim->Run());
  if (fleet_sim) HANGAR_RETURN_IF_ERROR(fleet_sim->Run());
  Summarise(*sim, submit, &out.training);
  out.training.preemptions = book.preemptions;
  out.training.gpu_hours = book.gpu_ms / 1000 / 3600;
  out.fleet = fleet.ledger();
  out.wall_s = static_cast<double>(MonotonicNanos() - t0) / 1e9;
  return out;
}

nlohmann::json ServicesJson(const ServicesOutcome& o) {
  const TrainingFigures& t = o.training;
  const FleetLedger& f = o.fleet;
  const double span_h = static_cast<double>(f.span) / kHour;
  nlohmann::json j;
  j["layout"] = FleetLayoutName(o.layout);
  j["fleet_gpus"] = o.fleet_gpus;
  j["training_gpus"] = o.training_gpus;
  j["training"] = {{"jobs", t.jobs},
                   {"too_big", t.too_big},
                   {"unfinished", t.unfinished},
                   {"mean_jct_s", t.mean_jct_s},
                   {"p50_jct_s", t.p50_jct_s},
                   {"p95_jct_s", t.p95_jct_s},
                   {"mean_queue_s", t.mean_queue_s},
                   {"preempted_for_replicas", t.preemptions},
                   {"gpu_hours_in_span", t.gpu_hours}};
  j["serving"] = {{"span_h", span_h},
                  {"demand_rps_hours", f.demand_rps_s / 3600},
                  {"unserved_rps_hours", f.unserved_rps_s / 3600},
                  {"unserved_fraction", f.unserved_fraction()},
                  {"time_under_demand_fraction", f.under_fraction()},
                  {"replica_gpu_hours", f.replica_gpu_s / 3600},
                  {"mean_wanted_replicas",
                   f.span > 0 ? f.wanted_replica_s * kSecond / static_cast<double>(f.span) : 0},
                  {"peak_replicas", f.peak_replicas},
                  {"replica_starts", f.replica_starts},
                  {"replicas_preempted", f.replicas_preempted},
                  {"scale_outs", f.scale_outs},
                  {"scale_ins", f.scale_ins}};
  j["sim_wall_s"] = o.wall_s;
  return j;
}

}  // namespace hangar::sim
