#include "sim/replay/replay.h"

#include <algorithm>
#include <atomic>
#include <map>
#include <mutex>
#include <thread>

#include "sim/engine/simulator.h"

namespace hangar::sim {

const std::vector<std::string>& ReplayPolicyNames() {
  static const std::vector<std::string> names = {"fifo", "fifo-backfill", "sjf-oracle", "las", "hangar"};
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
    p.gittins_ranks = true;
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

namespace {

std::shared_ptr<const sched::GangRequest> RequestFor(const TraceJob& j, const cluster::Topology& t) {
  sched::TaskShape s;
  if (j.gpus_per_replica > 0) {
    s.kind = j.milli_gpu < 1000 ? job::GpuKind::kShared : job::GpuKind::kWhole;
    s.gpus = j.gpus_per_replica;
    s.milli = j.milli_gpu;
  }
  s.milli_cpu = j.milli_cpu;
  s.memory_mib = j.memory_mib;
  s.models = s.NeedsGpu() ? t.MaskFor(j.gpu_models) : cluster::kAnyModel;
  return std::make_shared<sched::GangRequest>(sched::MakeSingleTaskRequest(s, j.replicas));
}

struct PartitionRun {
  std::vector<const TraceJob*> jobs;
  std::vector<JobOutcome> done;
  int64_t never = 0, cycles = 0, busy = 0;
  std::vector<std::tuple<Time, int64_t, int64_t>> steps;  // (t, allocated milli, pending)
  Status status;
};

void RunPartition(const ClusterPartition& part, uint32_t index, const ReplayOptions& opt,
                  PartitionRun* run) {
  SimConfig cfg;
  cfg.scheduler = opt.policy.scheduler;
  cfg.restore_cost = opt.restore_cost;
  cfg.gittins_ranks = opt.policy.gittins_ranks;
  auto sim = Simulator::Create(part.topology, cfg);
  if (!sim.ok()) {
    run->status = sim.status();
    return;
  }
  Simulator& s = **sim;
  for (size_t i = 0; i < run->jobs.size(); ++i) {
    const TraceJob& j = *run->jobs[i];
    SimJob sj;
    sj.id = i + 1;
    sj.request = RequestFor(j, *part.topology);
    sj.submit = j.submit;
    sj.runtime = j.runtime;
    sj.time_limit = opt.policy.knows_runtime ? std::max<Duration>(j.runtime, 1) : j.time_limit;
    sj.priority = j.priority;
    sj.tier = j.tier;
    sj.seq = j.row;
    s.AddJob(std::move(sj));
  }
  SimObserver obs;
  obs.on_cycle = [&](Time t, int64_t alloc, size_t pending) {
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
    o.partition = index;
    run->done.push_back(o);
  }
  run->cycles = s.cycles();
  run->busy = s.busy_gpu_ms();
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

}  // namespace

StatusOr<ReplayResult> RunReplay(std::vector<TraceJob> jobs,
                                 const std::vector<ClusterPartition>& partitions,
                                 const ReplayOptions& opt) {
  const int64_t t_start = MonotonicNanos();
  if (opt.load <= 0) return Status::InvalidArgument("--load must be above 0");
  if (partitions.empty()) return Status::InvalidArgument("no cluster to replay on");
  // Select by submit day, then compress the gaps between arrivals.
  std::erase_if(jobs, [&](const TraceJob& j) {
    return (opt.from && j.submit < *opt.from) || (opt.to && j.submit >= *opt.to + kDay);
  });
  if (jobs.empty()) return Status::InvalidArgument("no job in the trace was submitted in the selected days");
  std::stable_sort(jobs.begin(), jobs.end(), [](const TraceJob& a, const TraceJob& b) {
    return a.submit != b.submit ? a.submit < b.submit : a.row < b.row;
  });
  const Time t0 = jobs.front().submit;
  for (auto& j : jobs) j.submit = t0 + static_cast<Time>(static_cast<double>(j.submit - t0) / opt.load);

  ReplayResult result;
  std::map<std::string, uint32_t> index;
  for (uint32_t i = 0; i < partitions.size(); ++i) index[partitions[i].name] = i;
  std::vector<PartitionRun> runs(partitions.size());
  for (const auto& j : jobs) {
    auto it = partitions.size() == 1 && partitions[0].name.empty() ? index.begin() : index.find(j.partition);
    if (it == index.end()) {
      result.no_partition++;
      continue;
    }
    runs[it->second].jobs.push_back(&j);
  }
  // Largest partitions first, so two threads finish together.
  std::vector<uint32_t> order(partitions.size());
  for (uint32_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) { return runs[a].jobs.size() > runs[b].jobs.size(); });
  std::atomic<size_t> next{0};
  auto worker = [&] {
    for (size_t k; (k = next.fetch_add(1)) < order.size();) {
      RunPartition(partitions[order[k]], order[k], opt, &runs[order[k]]);
    }
  };
  std::vector<std::thread> threads;
  for (int i = 1; i < std::max(1, opt.threads); ++i) threads.emplace_back(worker);
  worker();
  for (auto& t : threads) t.join();

  result.first_submit = t0;
  result.last_end = t0;
  for (size_t p = 0; p < runs.size(); ++p) {
    HANGAR_RETURN_IF_ERROR(runs[p].status);
    result.never += runs[p].never;
    result.cycles += runs[p].cycles;
    result.busy_gpu_ms += runs[p].busy;
    result.total_gpus += partitions[p].topology->total_gpus();
    for (const auto& o : runs[p].done) {
      result.last_end = std::max(result.last_end, o.end);
      result.done.push_back(o);
    }
  }
  result.timeline = Timeline(runs, result.total_gpus, result.first_submit, result.last_end, 400);
  result.wall_s = (MonotonicNanos() - t_start) / 1e9;
  return result;
}

nlohmann::json ReplayMetrics(const ReplayResult& r) {
  nlohmann::json j;
  std::vector<double> jct, queue;
  double slowdown = 0;
  int64_t preemptions = 0;
  for (const auto& o : r.done) {
    jct.push_back((o.end - o.submit) / 1000.0);
    queue.push_back((o.start - o.submit) / 1000.0);
    slowdown += static_cast<double>(o.end - o.submit) / static_cast<double>(std::max<Duration>(o.runtime, 1000));
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
  j["gpu_util_pct"] = makespan > 0 && r.total_gpus > 0
                          ? 100.0 * (r.busy_gpu_ms / 1000.0) / (static_cast<double>(r.total_gpus) * makespan)
                          : 0.0;
  j["avg_slowdown"] = r.done.empty() ? 0.0 : slowdown / static_cast<double>(r.done.size());
  j["preemptions"] = preemptions;
  j["cycles"] = r.cycles;
  j["gpus"] = r.total_gpus;
  j["wall_s"] = r.wall_s;
  return j;
}

}  // namespace hangar::sim
