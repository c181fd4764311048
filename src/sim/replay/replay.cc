#include "sim/replay/replay.h"

#include <algorithm>
#include <atomic>
#include <map>
#include <mutex>
#include <numeric>
#include <set>
#include <thread>

#include "job/queue_spec.h"
#include "sched/queue/quota.h"
#include "sim/engine/simulator.h"
#include "sim/fgd/openb_trace.h"
#include "sim/fgd/protocol.h"

namespace hangar::sim {

const std::vector<std::string>& ReplayPolicyNames() {
  static const std::vector<std::string> names = {"fifo", "fifo-backfill", "sjf-oracle", "las",
                                                 "hangar"};
  return names;
}

StatusOr<ReplayPolicy> MakeReplayPolicy(const std::string& name) {
  ReplayPolicy p;
  p.name = name;
  sched::SchedulerConfig& s = p.scheduler;
  s.placement_policy = "best-fit";
  if (name == "fifo") {
    s.queue_policy = "fifo";
    s.strict_order = true;
  } else if (name == "fifo-backfill") {
    s.queue_policy = "fifo";
    s.backfill = sched::BackfillMode::kEasy;
    p.knows_runtime = true;
  } else if (name == "sjf-oracle") {
    s.queue_policy = "sjf";
    s.backfill = sched::BackfillMode::kEasy;
    p.knows_runtime = true;
  } else if (name == "las") {
    s.queue_policy = "las";
    s.backfill = sched::BackfillMode::kNone;
    s.preemption.mode = sched::PreemptionMode::kLas;
  } else if (name == "hangar") {
    s.queue_policy = "gittins";
    s.placement_policy = "hangar";
    s.backfill = sched::BackfillMode::kNone;
    s.preemption.mode = sched::PreemptionMode::kGittins;
    // Philly, Oct-Nov 2017, load 4: margin 1 gave an average JCT of 15,386 s with 24,540
    // preemptions; 2: 15,190 s; 3: 15,138 s, 13,246 preemptions; 4: 15,242 s.
    s.preemption.gittins_margin = 3.0;
    p.gittins_ranks = true;
    // Oct-Nov 2017 at load 4: 15,138 s without, 15,054 s with; the whole trace 17,907 / 17,800 s.
    p.gittins_by_predecessor = true;
  } else {
    std::string known;
    for (const auto& n : ReplayPolicyNames()) known += (known.empty() ? "" : ", ") + n;
    return Status::InvalidArgument("unknown replay policy '" + name + "'; choose one of: " + known);
  }
  return p;
}

std::shared_ptr<const cluster::Topology> UniformCluster(const std::string& name, int nodes,
                                                        int gpus_per_node) {
  cluster::TopologyBuilder b(name.empty() ? "cluster" : name);
  for (int i = 0; i < nodes; ++i) {
    cluster::NodeSpec s;
    s.name = (name.empty() ? "node" : name) + "-" + std::to_string(i);
    s.gpus = gpus_per_node;
    s.gpu_model = "GPU";
    s.gpu_memory_mib = 24 * 1024;
    s.milli_cpu = 64000;
    s.memory_mib = 512 * 1024;
    b.AddNode(std::move(s));
  }
  return *std::move(b).Build();
}

StatusOr<std::shared_ptr<const cluster::Topology>> ReadOpenbCluster(const std::string& path) {
  HANGAR_ASSIGN_OR_RETURN(auto nodes, fgd::ReadOpenbNodes(path));
  return fgd::BuildPriorityCluster(nodes, std::vector<int32_t>(nodes.size(), 0));
}

StatusOr<std::shared_ptr<const cluster::Topology>> PoolOf(
    const std::vector<ClusterPartition>& partitions) {
  cluster::TopologyBuilder b("pool");
  for (const auto& p : partitions) {
    const cluster::Topology& t = *p.topology;
    for (const auto& n : t.nodes()) {
      cluster::NodeSpec s;
      s.name = n.name;
      s.spine = t.spines()[n.spine].name;
      s.leaf = t.leaves()[n.leaf].name;
      s.rack = n.rack;
      s.group = n.group;
      s.gpus = n.num_gpus;
      s.gpu_model = n.num_gpus > 0 ? t.models()[n.model] : "";
      s.gpu_memory_mib = n.gpu_memory_mib;
      s.milli_cpu = n.milli_cpu;
      s.memory_mib = n.memory_mib;
      s.mig = n.num_gpus > 0 && t.gpus()[n.first_gpu].mig;
      s.labels = n.labels;
      b.AddNode(std::move(s));
    }
  }
  return std::move(b).Build();
}

std::shared_ptr<const sched::GangRequest> RequestFor(const TraceJob& j,
                                                     const cluster::Topology& t) {
  sched::TaskShape s;
  if (j.gpus_per_replica > 0) {
    s.kind = j.milli_gpu < 1000 ? job::GpuKind::kShared : job::GpuKind::kWhole;
    s.gpus = j.gpus_per_replica;
    s.milli = j.milli_gpu;
  }
  s.milli_cpu = j.milli_cpu;
  s.memory_mib = j.memory_mib;
  s.models = s.NeedsGpu() ? t.MaskFor(j.gpu_models) : cluster::kAnyModel;
  sched::GangRequest r = sched::MakeSingleTaskRequest(s, j.replicas);
  if (!j.nodes.empty()) {  // as CompileGang does for a job file's rules
    r.nodes = sched::CompileNodeRule(j.nodes, t);
    r.groups[0].excluded_nodes = r.nodes.excluded;
    sched::Fingerprint(&r);
  }
  return std::make_shared<sched::GangRequest>(std::move(r));
}

namespace {

// What one simulator replays: a static partition (one queue, no quotas), or the shared pool
// (every partition a leaf queue of `tree`).
struct PartitionRun {
  std::shared_ptr<const cluster::Topology> topology;
  std::shared_ptr<const sched::queue::QueueTree> tree;  // shared pool only
  std::vector<job::QueueSpec> specs;                    // what `tree` was built from
  std::vector<uint32_t> parts;                          // local queue -> partition index
  std::vector<int64_t> guarantee;                       // local queue -> guaranteed GPUs (milli)
  std::vector<uint32_t> leaf;                           // local queue -> leaf in `tree`
  std::vector<const TraceJob*> jobs;
  std::vector<uint32_t> job_queue;  // job -> local queue
  std::vector<JobOutcome> done;
  int64_t never = 0, cycles = 0, busy = 0;
  std::vector<std::tuple<Time, int64_t, int64_t>> steps;  // (t, allocated milli, pending)
  std::vector<QueueOutcome> queues;                       // by local queue
  StagingStats staging;
  Status status;
};

// Follows each queue's held and waiting GPUs through the simulator's callbacks (QueueOutcome
// defines what is measured). The simulator has no arrival callback; arrivals are replayed here in
// its order (submit, then row): those at time t come after the finishes at t and before the
// cycle at t, so every callback first takes in the arrivals that precede it.
class QueueWatch {
 public:
  QueueWatch(const PartitionRun& run, const std::vector<SimJob>& jobs,
             std::vector<QueueOutcome>* out)
      : run_(run), jobs_(jobs), out_(*out) {
    const size_t nq = run.guarantee.size();
    held_.assign(nq, 0);
    waiting_.resize(nq);
    waiting_sum_.assign(nq, 0);
    denied_.assign(nq, 0);
    within_.assign(jobs.size(), 0);
    started_.assign(jobs.size(), 0);
    arrivals_.resize(jobs.size());
    for (size_t i = 0; i < arrivals_.size(); ++i) arrivals_[i] = i;
    std::stable_sort(arrivals_.begin(), arrivals_.end(), [&](size_t a, size_t b) {
      return jobs[a].submit != jobs[b].submit ? jobs[a].submit < jobs[b].submit
                                              : jobs[a].seq < jobs[b].seq;
    });
  }

  void Start(Time t, const SimJob& job) {
    Advance(t);
    ArriveUpTo(t, true);
    const size_t j = job.id - 1;
    const uint32_t q = run_.job_queue[j];
    const int64_t g = Gpus(j);
    Unwait(q, g);
    held_[q] += g;
    if (started_[j]) return;
    started_[j] = 1;
    if (!within_[j]) return;
    const Duration wait = t - job.submit;
    if (wait <= 0) return;
    out_[q].within_late++;
    out_[q].within_wait_total += wait;
    out_[q].within_wait_max = std::max(out_[q].within_wait_max, wait);
  }
  void Finish(Time t, const SimJob& job) {
    Advance(t);
    ArriveUpTo(t, false);
    held_[run_.job_queue[job.id - 1]] -= Gpus(job.id - 1);
  }
  void Preempt(Time t, const SimJob& job) {
    Advance(t);
    ArriveUpTo(t, true);
    const uint32_t q = run_.job_queue[job.id - 1];
    const int64_t g = Gpus(job.id - 1);
    held_[q] -= g;
    waiting_[q].insert(g);
    waiting_sum_[q] += g;
  }
  void Cycle(Time t) {
    Advance(t);
    ArriveUpTo(t, true);
    int borrowers = 0;
    for (size_t q = 0; q < held_.size(); ++q) {
      if (denied_[q]) out_[q].denied_ms += t - last_cycle_;
      const int64_t borrowed = held_[q] - run_.guarantee[q];
      out_[q].peak_borrowed_milli = std::max(out_[q].peak_borrowed_milli, borrowed);
      borrowers += borrowed > 0;
    }
    for (size_t q = 0; q < held_.size(); ++q) {
      // A queue that borrows holds more than its guarantee, so it is never denied here.
      denied_[q] = borrowers > 0 && !waiting_[q].empty() &&
                   held_[q] + *waiting_[q].begin() <= run_.guarantee[q];
      out_[q].denied_cycles += denied_[q];
    }
    last_cycle_ = t;
  }

 private:
  int64_t Gpus(size_t j) const { return jobs_[j].request->total_milli_gpu; }
  // Integrates each queue's entitlement (its demand, held + waiting, up to its guarantee) and the
  // part of it the queue did not hold, up to `t`.
  void Advance(Time t) {
    if (t <= last_event_) return;
    if (last_event_ == INT64_MIN) {  // the first event: nothing held or waiting before it
      last_event_ = t;
      return;
    }
    const Duration dt = t - last_event_;
    last_event_ = t;
    for (size_t q = 0; q < held_.size(); ++q) {
      const int64_t entitled = std::min(held_[q] + waiting_sum_[q], run_.guarantee[q]);
      out_[q].entitled_gpu_ms += entitled * dt / 1000;
      out_[q].shortfall_gpu_ms += std::max<int64_t>(0, entitled - held_[q]) * dt / 1000;
    }
  }
  void Unwait(uint32_t q, int64_t g) {
    auto it = waiting_[q].find(g);
    if (it == waiting_[q].end()) return;
    waiting_[q].erase(it);
    waiting_sum_[q] -= g;
  }
  void ArriveUpTo(Time t, bool inclusive) {
    for (; next_ < arrivals_.size(); ++next_) {
      const size_t j = arrivals_[next_];
      const Time s = jobs_[j].submit;
      if (inclusive ? s > t : s >= t) break;
      const uint32_t q = run_.job_queue[j];
      const int64_t g = Gpus(j);
      if (held_[q] + waiting_sum_[q] + g <= run_.guarantee[q]) {
        within_[j] = 1;
        out_[q].asked_within++;
      }
      waiting_[q].insert(g);
      waiting_sum_[q] += g;
    }
  }

  const PartitionRun& run_;
  const std::vector<SimJob>& jobs_;
  std::vector<QueueOutcome>& out_;
  std::vector<int64_t> held_;
  std::vector<std::multiset<int64_t>> waiting_;
  std::vector<int64_t> waiting_sum_;
  std::vector<uint8_t> denied_, within_, started_;
  std::vector<size_t> arrivals_;
  size_t next_ = 0;
  Time last_cycle_ = 0;
  Time last_event_ = INT64_MIN;
};

StatusOr<std::unique_ptr<Engine>> LeanEngine(std::shared_ptr<const cluster::Topology> topology,
                                             const SimConfig& cfg) {
  HANGAR_ASSIGN_OR_RETURN(auto sim, Simulator::Create(std::move(topology), cfg));
  return std::unique_ptr<Engine>(std::move(sim));
}

void RunPartition(const ReplayOptions& opt, PartitionRun* run) {
  SimConfig cfg;
  cfg.scheduler = opt.policy.scheduler;
  cfg.restore_cost = opt.restore_cost;
  cfg.preemption_grace = opt.preemption_grace;
  cfg.gittins_ranks = opt.policy.gittins_ranks;
  cfg.gittins_by_predecessor = opt.policy.gittins_by_predecessor;
  cfg.staging = opt.staging;
  if (run->tree) {
    cfg.queues = run->tree;
    cfg.queue_specs = run->specs;
    cfg.share_half_life = opt.share_half_life;
  }
  auto sim = opt.engine ? opt.engine(run->topology, cfg) : LeanEngine(run->topology, cfg);
  if (!sim.ok()) {
    run->status = sim.status();
    return;
  }
  Engine& s = **sim;
  for (size_t i = 0; i < run->jobs.size(); ++i) {
    const TraceJob& j = *run->jobs[i];
    if (Status names = sched::CheckNodeNames(j.nodes, *run->topology); !names.ok()) {
      run->status =
          Status::InvalidArgument("trace line " + std::to_string(j.row) + ": " + names.message());
      return;
    }
    SimJob sj;
    sj.id = i + 1;
    sj.request = RequestFor(j, *run->topology);
    sj.submit = j.submit;
    sj.runtime = j.runtime;
    sj.time_limit = opt.policy.knows_runtime ? std::max<Duration>(j.runtime, 1) : j.time_limit;
    sj.priority = j.priority;
    sj.tier = run->tree ? job::Tier::kGuaranteed : j.tier;
    sj.queue = run->tree ? run->leaf[run->job_queue[i]] : 0;
    sj.seq = j.row;
    if (opt.staging.enabled) sj.artifacts = j.artifacts;
    s.AddJob(std::move(sj));
  }
  run->queues.assign(run->parts.size(), {});
  QueueWatch watch(*run, s.jobs(), &run->queues);
  SimObserver obs;
  obs.on_start = [&](Time t, const SimJob& j, const sched::Placement&) { watch.Start(t, j); };
  obs.on_finish = [&](Time t, const SimJob& j) { watch.Finish(t, j); };
  obs.on_preempt = [&](Time t, const SimJob& j, const sched::Preemption&) { watch.Preempt(t, j); };
  obs.on_cycle = [&](Time t, int64_t alloc, size_t pending) {
    watch.Cycle(t);
    run->steps.emplace_back(t, alloc, static_cast<int64_t>(pending));
  };
  s.set_observer(obs);
  run->status = s.Run();
  for (size_t i = 0; i < s.jobs().size(); ++i) {
    const SimJobResult& r = s.results()[i];
    if (r.never || r.end == kNever) {
      run->never++;
      continue;
    }
    JobOutcome o;
    o.submit = s.jobs()[i].submit;
    o.start = r.first_start;
    o.end = r.end;
    o.runtime = s.jobs()[i].runtime;
    o.gpus_milli = s.jobs()[i].request->total_milli_gpu;
    o.preemptions = r.preemptions;
    o.partition = run->parts[run->job_queue[i]];
    o.staging = r.staging;
    run->done.push_back(o);
  }
  run->cycles = s.cycles();
  run->busy = s.busy_gpu_ms();
  run->staging = s.staging_stats();
  for (size_t q = 0; q < run->queues.size(); ++q) {
    run->queues[q].guarantee_milli = run->guarantee[q];
    run->queues[q].gpu_ms = run->tree ? s.queue_gpu_ms()[run->leaf[q]] : s.busy_gpu_ms();
  }
}

// Merges the partitions' step functions into ~`buckets` samples of the whole cluster.
std::vector<UsageSample> Timeline(const std::vector<PartitionRun>& runs, int64_t total_gpus,
                                  Time first, Time last, int buckets) {
  std::vector<std::tuple<Time, size_t, int64_t, int64_t>> all;
  for (size_t p = 0; p < runs.size(); ++p) {
    for (const auto& [t, a, q] : runs[p].steps) all.emplace_back(t, p, a, q);
  }
  std::sort(all.begin(), all.end());
  std::vector<UsageSample> out;
  if (last <= first || total_gpus == 0) return out;
  std::vector<int64_t> alloc(runs.size(), 0), pend(runs.size(), 0);
  int64_t alloc_sum = 0, pend_sum = 0;
  const double width = static_cast<double>(last - first) / buckets;
  size_t k = 0;
  Time t_prev = first;
  for (int b = 0; b < buckets; ++b) {
    const Time b_end = first + static_cast<Time>(width * (b + 1));
    double area = 0;
    for (; k < all.size() && std::get<0>(all[k]) <= b_end; ++k) {
      const auto& [t, p, a, q] = all[k];
      area += static_cast<double>(alloc_sum) * static_cast<double>(std::max<Time>(0, t - t_prev));
      t_prev = std::max(t_prev, t);
      alloc_sum += a - alloc[p];
      pend_sum += q - pend[p];
      alloc[p] = a;
      pend[p] = q;
    }
    area += static_cast<double>(alloc_sum) * static_cast<double>(std::max<Time>(0, b_end - t_prev));
    const Time b_start = first + static_cast<Time>(width * b);
    const double span = static_cast<double>(std::max<Time>(1, b_end - std::max(b_start, first)));
    t_prev = std::max(t_prev, b_end);
    out.push_back({b_end, 100.0 * area / span / (static_cast<double>(total_gpus) * 1000.0),
                   static_cast<double>(pend_sum)});
  }
  return out;
}

Status CheckStaging(const ReplayOptions& opt) {
  const StagingConfig& s = opt.staging;
  if (!s.enabled) return Status::Ok();
  if (opt.engine)
    return Status::InvalidArgument(
        "the staging model runs in the lean engine only (--engine lean)");
  if (!(s.origin_bytes_per_s > 0) || !(s.peer_bytes_per_s > 0)) {
    return Status::InvalidArgument("--origin-mbps and --peer-mbps must be above 0");
  }
  if (s.node_cache_bytes < 0) return Status::InvalidArgument("--node-cache-gb must be 0 or more");
  if (opt.artifacts.models_per_class < 1 || opt.artifacts.datasets_per_group < 1) {
    return Status::InvalidArgument(
        "--models-per-class and --datasets-per-group must be at least 1");
  }
  return Status::Ok();
}

}  // namespace

namespace {
// By (submit, row): an order of indices first, then each job moved once (a job is ~200 bytes
// with strings and vectors, and sorting the jobs themselves was 3% of a Philly replay).
std::vector<TraceJob> SortedBySubmit(std::vector<TraceJob> jobs) {
  auto before = [](const TraceJob& a, const TraceJob& b) {
    return a.submit != b.submit ? a.submit < b.submit : a.row < b.row;
  };
  if (std::is_sorted(jobs.begin(), jobs.end(), before)) return jobs;
  std::vector<uint32_t> order(jobs.size());
  std::iota(order.begin(), order.end(), 0u);
  std::stable_sort(order.begin(), order.end(),
                   [&](uint32_t a, uint32_t b) { return before(jobs[a], jobs[b]); });
  std::vector<TraceJob> sorted;
  sorted.reserve(jobs.size());
  for (uint32_t i : order) sorted.push_back(std::move(jobs[i]));
  return sorted;
}
}  // namespace

StatusOr<ReplayResult> RunReplay(std::vector<TraceJob> jobs,
                                 const std::vector<ClusterPartition>& partitions,
                                 const ReplayOptions& opt) {
  const int64_t t_start = MonotonicNanos();
  if (opt.load <= 0) return Status::InvalidArgument("--load must be above 0");
  if (partitions.empty()) return Status::InvalidArgument("no cluster to replay on");
  HANGAR_RETURN_IF_ERROR(CheckStaging(opt));
  // Select by submit day, then compress the gaps between arrivals.
  std::erase_if(jobs, [&](const TraceJob& j) {
    return (opt.from && j.submit < *opt.from) || (opt.to && j.submit >= *opt.to + kDay);
  });
  if (jobs.empty())
    return Status::InvalidArgument("no job in the trace was submitted in the selected days");
  jobs = SortedBySubmit(std::move(jobs));
  ReplayResult result;
  result.staging = opt.staging;
  if (opt.staging.enabled) {
    // By the trace's own days, before --load compresses them.
    const ArtifactCatalogue catalogue = AttachArtifacts(&jobs, opt.artifacts);
    result.staging_objects = static_cast<int64_t>(catalogue.objects());
    result.staging_catalogue_bytes = catalogue.bytes();
  }
  const Time t0 = jobs.front().submit;
  for (auto& j : jobs)
    j.submit = t0 + static_cast<Time>(static_cast<double>(j.submit - t0) / opt.load);

  result.shared_pool = opt.shared_pool;
  std::map<std::string, uint32_t> index;
  for (uint32_t i = 0; i < partitions.size(); ++i) index[partitions[i].name] = i;
  const bool whole = partitions.size() == 1 && partitions[0].name.empty();
  std::vector<PartitionRun> runs;
  std::vector<uint32_t> run_of(partitions.size()), local_of(partitions.size());
  if (opt.shared_pool) {
    if (whole || index.size() != partitions.size() || index.count("")) {
      return Status::InvalidArgument(
          "a shared pool needs partitions with distinct names (--philly-vcs)");
    }
    PartitionRun run;
    HANGAR_ASSIGN_OR_RETURN(run.topology, PoolOf(partitions));
    std::vector<job::QueueSpec> specs;
    for (const auto& p : partitions) {
      job::QueueSpec q;
      q.name = p.name;
      q.quota.gpus_milli = p.topology->total_gpus() * cluster::kMilliPerGpu;
      specs.push_back(std::move(q));
    }
    HANGAR_ASSIGN_OR_RETURN(run.tree, sched::queue::QueueTree::Build(specs, *run.topology));
    run.specs = specs;
    for (uint32_t i = 0; i < partitions.size(); ++i) {
      run.parts.push_back(i);
      run.guarantee.push_back(partitions[i].topology->total_gpus() * cluster::kMilliPerGpu);
      const int leaf = run.tree->FindLeaf(partitions[i].name);
      if (leaf < 0) return Status::Internal("queue " + partitions[i].name + " is not a leaf");
      run.leaf.push_back(static_cast<uint32_t>(leaf));
      run_of[i] = 0;
      local_of[i] = i;
    }
    runs.push_back(std::move(run));
  } else {
    runs.resize(partitions.size());
    for (uint32_t i = 0; i < partitions.size(); ++i) {
      runs[i].topology = partitions[i].topology;
      runs[i].parts = {i};
      runs[i].guarantee = {partitions[i].topology->total_gpus() * cluster::kMilliPerGpu};
      run_of[i] = i;
      local_of[i] = 0;
    }
  }
  for (const auto& j : jobs) {
    auto it = whole ? index.begin() : index.find(j.partition);
    if (it == index.end()) {
      result.no_partition++;
      continue;
    }
    PartitionRun& run = runs[run_of[it->second]];
    run.jobs.push_back(&j);
    run.job_queue.push_back(local_of[it->second]);
  }
  // Largest partitions first, so two threads finish together.
  std::vector<uint32_t> order(runs.size());
  for (uint32_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(),
            [&](uint32_t a, uint32_t b) { return runs[a].jobs.size() > runs[b].jobs.size(); });
  std::atomic<size_t> next{0};
  auto worker = [&] {
    for (size_t k; (k = next.fetch_add(1)) < order.size();) {
      RunPartition(opt, &runs[order[k]]);
    }
  };
  std::vector<std::thread> threads;
  for (int i = 1; i < std::max(1, opt.threads); ++i) threads.emplace_back(worker);
  worker();
  for (auto& t : threads) t.join();

  result.first_submit = t0;
  result.last_end = t0;
  result.queues.resize(partitions.size());
  for (const auto& p : partitions) result.total_gpus += p.topology->total_gpus();
  for (size_t p = 0; p < runs.size(); ++p) {
    HANGAR_RETURN_IF_ERROR(runs[p].status);
    result.never += runs[p].never;
    result.cycles += runs[p].cycles;
    result.busy_gpu_ms += runs[p].busy;
    result.staging_stats.Add(runs[p].staging);
    for (const auto& o : runs[p].done) {
      result.last_end = std::max(result.last_end, o.end);
      result.done.push_back(o);
    }
    for (size_t q = 0; q < runs[p].parts.size(); ++q) {
      result.queues[runs[p].parts[q]] = runs[p].queues[q];
      result.queues[runs[p].parts[q]].name = partitions[runs[p].parts[q]].name;
    }
  }
  result.timeline = Timeline(runs, result.total_gpus, result.first_submit, result.last_end, 400);
  result.wall_s = (MonotonicNanos() - t_start) / 1e9;
  return result;
}

nlohmann::json ReplayMetrics(const ReplayResult& r) {
  nlohmann::json j;
  std::vector<double> jct, queue, runtime;
  double slowdown = 0;
  int64_t preemptions = 0;
  for (const auto& o : r.done) {
    jct.push_back((o.end - o.submit) / 1000.0);
    queue.push_back((o.start - o.submit) / 1000.0);
    runtime.push_back(o.runtime / 1000.0);
    slowdown += static_cast<double>(o.end - o.submit) /
                static_cast<double>(std::max<Duration>(o.runtime, 1000));
    preemptions += o.preemptions;
  }
  auto mean = [](const std::vector<double>& v) {
    double s = 0;
    for (double x : v) s += x;
    return v.empty() ? 0.0 : s / static_cast<double>(v.size());
  };
  auto pct = [](std::vector<double> v, double p) {
    if (v.empty()) return 0.0;
    std::sort(v.begin(), v.end());
    size_t rank = static_cast<size_t>(std::ceil(p * static_cast<double>(v.size())));
    return v[std::clamp<size_t>(rank, 1, v.size()) - 1];
  };
  const double makespan = (r.last_end - r.first_submit) / 1000.0;
  j["jobs"] = r.done.size();
  j["never"] = r.never;
  j["no_partition"] = r.no_partition;
  j["avg_jct_s"] = mean(jct);
  j["p50_jct_s"] = pct(jct, 0.50);
  j["p99_jct_s"] = pct(jct, 0.99);
  j["avg_queue_s"] = mean(queue);
  j["p99_queue_s"] = pct(queue, 0.99);
  j["makespan_s"] = makespan;
  j["gpu_util_pct"] =
      makespan > 0 && r.total_gpus > 0
          ? 100.0 * (r.busy_gpu_ms / 1000.0) / (static_cast<double>(r.total_gpus) * makespan)
          : 0.0;
  j["avg_slowdown"] = r.done.empty() ? 0.0 : slowdown / static_cast<double>(r.done.size());
  j["avg_runtime_s"] = mean(runtime);  // the no-queueing bound on avg_jct_s
  j["mode"] = r.shared_pool                                      ? "shared-pool"
              : r.queues.size() == 1 && r.queues[0].name.empty() ? "cluster"
                                                                 : "partitions";
  // Per partition (queue): see QueueOutcome.
  std::vector<double> q_jct(r.queues.size(), 0), q_wait(r.queues.size(), 0);
  std::vector<int64_t> q_jobs(r.queues.size(), 0);
  for (const auto& o : r.done) {
    if (o.partition >= r.queues.size()) continue;
    q_jobs[o.partition]++;
    q_jct[o.partition] += (o.end - o.submit) / 1000.0;
    q_wait[o.partition] += (o.start - o.submit) / 1000.0;
  }
  nlohmann::json queues = nlohmann::json::array();
  int64_t asked = 0, late = 0, denied_cycles = 0, entitled = 0, shortfall = 0;
  double worst_met = 100.0;
  Duration wait_max = 0, wait_total = 0, denied_ms = 0;
  for (size_t q = 0; q < r.queues.size(); ++q) {
    const QueueOutcome& x = r.queues[q];
    const double n = static_cast<double>(std::max<int64_t>(1, q_jobs[q]));
    queues.push_back(
        {{"name", x.name},
         {"guarantee_gpus", x.guarantee_milli / 1000.0},
         {"gpu_hours", x.gpu_ms / 1000.0 / 3600.0},
         {"peak_borrowed_gpus", std::max<int64_t>(0, x.peak_borrowed_milli) / 1000.0},
         {"jobs", q_jobs[q]},
         {"avg_jct_s", q_jct[q] / n},
         {"avg_queue_s", q_wait[q] / n},
         {"asked_within", x.asked_within},
         {"within_late", x.within_late},
         {"within_wait_max_s", x.within_wait_max / 1000.0},
         {"within_wait_avg_s",
          x.within_late ? x.within_wait_total / 1000.0 / static_cast<double>(x.within_late) : 0.0},
         {"denied_cycles", x.denied_cycles},
         {"denied_s", x.denied_ms / 1000.0},
         {"entitled_gpu_hours", x.entitled_gpu_ms / 1000.0 / 3600.0},
         {"shortfall_gpu_hours", x.shortfall_gpu_ms / 1000.0 / 3600.0},
         {"entitlement_met_pct", x.entitled_gpu_ms > 0
                                     ? 100.0 * (1.0 - static_cast<double>(x.shortfall_gpu_ms) /
                                                          static_cast<double>(x.entitled_gpu_ms))
                                     : 100.0}});
    asked += x.asked_within;
    late += x.within_late;
    wait_max = std::max(wait_max, x.within_wait_max);
    wait_total += x.within_wait_total;
    denied_cycles += x.denied_cycles;
    denied_ms += x.denied_ms;
    entitled += x.entitled_gpu_ms;
    shortfall += x.shortfall_gpu_ms;
    worst_met = std::min(worst_met, x.entitled_gpu_ms > 0
                                        ? 100.0 * (1.0 - static_cast<double>(x.shortfall_gpu_ms) /
                                                             static_cast<double>(x.entitled_gpu_ms))
                                        : 100.0);
  }
  j["queues"] = queues;
  j["asked_within"] = asked;
  j["within_late"] = late;
  j["within_wait_max_s"] = wait_max / 1000.0;
  j["within_wait_avg_s"] = late ? wait_total / 1000.0 / static_cast<double>(late) : 0.0;
  j["denied_cycles"] = denied_cycles;
  j["denied_s"] = denied_ms / 1000.0;
  j["entitlement_met_pct"] =
      entitled > 0 ? 100.0 * (1.0 - static_cast<double>(shortfall) / static_cast<double>(entitled))
                   : 100.0;
  j["worst_queue_entitlement_met_pct"] = worst_met;
  j["preemptions"] = preemptions;
  j["cycles"] = r.cycles;
  j["gpus"] = r.total_gpus;
  j["wall_s"] = r.wall_s;
  if (r.staging.enabled) j["staging"] = StagingMetrics(r);
  return j;
}

nlohmann::json StagingMetrics(const ReplayResult& r) {
  const StagingStats& s = r.staging_stats;
  const StagingConfig& c = r.staging;
  const double staged = static_cast<double>(std::max<int64_t>(1, s.staged_starts));
  return {{"data_aware", c.data_aware},
          {"prestage", c.prestage},
          {"peer_fanout", c.peer_fanout},
          {"origin_mbps", c.origin_bytes_per_s / 1e6},
          {"peer_mbps", c.peer_bytes_per_s / 1e6},
          {"node_cache_gb", static_cast<double>(c.node_cache_bytes) / 1e9},
          {"objects", r.staging_objects},
          {"catalogue_gb", static_cast<double>(r.staging_catalogue_bytes) / 1e9},
          {"gpu_hours_lost", static_cast<double>(s.lost_gpu_ms) / 1000.0 / 3600.0},
          {"lost_pct_of_gpu_hours", r.busy_gpu_ms > 0 ? 100.0 * static_cast<double>(s.lost_gpu_ms) /
                                                            static_cast<double>(r.busy_gpu_ms)
                                                      : 0.0},
          {"starts_with_objects", s.starts_with_objects},
          {"staged_starts", s.staged_starts},
          {"avg_staging_s",
           s.staged_starts ? static_cast<double>(s.staging_ms) / 1000.0 / staged : 0.0},
          {"staging_s_total", static_cast<double>(s.staging_ms) / 1000.0},
          {"transfers", s.transfers},
          {"prestage_transfers", s.prestage_transfers},
          {"origin_transfers", s.origin_transfers},
          {"origin_gb", static_cast<double>(s.origin_bytes) / 1e9},
          {"peer_gb", static_cast<double>(s.peer_bytes) / 1e9},
          {"evictions", s.evictions},
          {"overflows", s.overflows}};
}

}  // namespace hangar::sim
