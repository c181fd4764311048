#include "sim/fgd/protocol.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <map>
#include <tuple>

#include "cluster/usage.h"
#include "sched/scheduler.h"
#include "sim/fgd/cluster_frag.h"
#include "sim/fgd/run_plan.h"

namespace hangar::sim::fgd {

namespace {

// Any size will do: pods ask for no GPU memory, so it never constrains a placement.
constexpr int64_t kGpuMemoryMib = 16 * 1024;

std::string BaseName(const std::string& path) {
  std::string base = path.substr(path.find_last_of('/') + 1);
  if (base.size() > 4 && base.ends_with(".csv")) base.resize(base.size() - 4);
  return base;
}

// Runs one pod through a scheduling cycle and commits what it decided. Returns whether the pod
// was placed; its nodes are measured again for the fragmentation metric.
bool PlaceOne(sched::Scheduler& scheduler, const sched::GangRequest& request,
              const sched::WorkloadProfile& profile, int64_t seed, uint64_t id,
              cluster::ClusterUsage& usage, ClusterFragmentation& frag, int64_t* used_milli) {
  sched::PendingJob job;
  job.id = id;
  job.request = &request;
  job.seq = id;
  sched::Snapshot snap;
  snap.usage = &usage;
  snap.pending = std::span<const sched::PendingJob>(&job, 1);
  snap.pending_presorted = true;
  snap.profile = &profile;
  // Each pod is a cycle of its own, which draws from its snapshot's seed: vary it per pod.
  snap.random_seed = static_cast<uint64_t>(seed) * 0x9E3779B97F4A7C15ull + id;
  snap.cpu_only_pending = request.total_milli_gpu > 0 ? 0 : 1;
  const sched::Decisions d = scheduler.Cycle(snap, /*now=*/0);
  if (d.placements.empty()) return false;
  const cluster::GangAssignment& a = d.placements.front().assignment;
  if (!usage.Allocate(a).ok()) return false;  // cannot happen: the cycle planned on a copy
  *used_milli += a.TotalMilliGpu(usage.topology());
  for (const auto& task : a.tasks) frag.Update(usage, task.node);
  return true;
}

// The stranded and starved shares (RunResult) of the cluster's GPUs, in percent.
void MeasureStranding(const cluster::ClusterUsage& usage, int64_t min_gpu_pod_cpu,
                      RunResult* result) {
  const auto& nodes = usage.topology().nodes();
  int64_t gpus = 0, starved_milli = 0;
  for (uint32_t n = 0; n < nodes.size(); ++n) {
    gpus += nodes[n].num_gpus;
    const cluster::NodeUsage& u = usage.node(n);
    if (u.condition.schedulable && u.free_cpu < min_gpu_pod_cpu) starved_milli += u.free_milli;
  }
  const double total = static_cast<double>(std::max<int64_t>(1, gpus));
  result->stranded_at_100 = 100.0 * static_cast<double>(usage.StrandedGpus()) / total;
  result->starved_at_100 =
      100.0 * static_cast<double>(starved_milli) / cluster::kMilliPerGpu / total;
}

}  // namespace

int64_t OpenbTrace::capacity_milli() const {
  int64_t gpus = 0;
  for (const auto& n : nodes) gpus += n.gpus;
  return gpus * cluster::kMilliPerGpu;
}

StatusOr<OpenbTrace> LoadOpenbTrace(const std::string& nodes_csv, const std::string& pods_csv) {
  OpenbTrace t;
  HANGAR_ASSIGN_OR_RETURN(t.nodes, ReadOpenbNodes(nodes_csv));
  HANGAR_ASSIGN_OR_RETURN(t.pods, ReadOpenbPods(pods_csv));
  t.workload = BaseName(pods_csv);
  auto by_name = [](const auto& a, const auto& b) { return a.name < b.name; };
  std::stable_sort(t.nodes.begin(), t.nodes.end(), by_name);
  std::stable_sort(t.pods.begin(), t.pods.end(), by_name);
  return t;
}

Status ScalePodCpu(double factor, OpenbTrace* trace) {
  if (!(factor > 0 && factor <= 100)) {
    return Status::InvalidArgument(
        "--cpu-scale must be above 0 and at most 100 (1.5 makes every pod "
        "ask for 1.5x its CPU)");
  }
  for (auto& p : trace->pods) {
    p.milli_cpu = static_cast<int64_t>(std::llround(static_cast<double>(p.milli_cpu) * factor));
  }
  return Status::Ok();
}

StatusOr<std::shared_ptr<const cluster::Topology>> BuildPriorityCluster(
    const std::vector<OpenbNode>& nodes, const std::vector<int32_t>& priority) {
  std::vector<size_t> order(nodes.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return priority[a] < priority[b]; });
  cluster::TopologyBuilder builder("openb");
  for (size_t i : order) {
    const OpenbNode& n = nodes[i];
    cluster::NodeSpec spec;
    spec.name = n.name;
    spec.gpus = n.gpus;
    spec.gpu_model = n.gpus > 0 ? n.model : "";
    spec.gpu_memory_mib = kGpuMemoryMib;
    spec.milli_cpu = n.milli_cpu;
    spec.memory_mib = n.memory_mib;
    spec.nvlink = cluster::NvlinkLayout::kNode;
    builder.AddNode(std::move(spec));
  }
  return std::move(builder).Build();
}

sched::WorkloadProfile TypicalPods(const std::vector<OpenbPod>& pods,
                                   const cluster::Topology& topology) {
  using Spec = std::tuple<int64_t, int32_t, int32_t, std::string>;  // cpu, milli, num, spec
  std::map<Spec, std::pair<int64_t, const OpenbPod*>> counts;
  for (const auto& p : pods) {
    const Spec key = p.num_gpu > 0 ? Spec{p.milli_cpu, p.gpu_milli, p.num_gpu, p.gpu_spec}
                                   : Spec{p.milli_cpu, 0, 0, ""};
    auto& slot = counts[key];
    slot.first++;
    slot.second = &p;
  }
  std::vector<sched::WorkloadProfile::Count> list;
  for (const auto& [key, value] : counts) {
    sched::TypicalTask t;
    std::tie(t.milli_cpu, t.milli, t.gpus, t.models_key) = key;
    t.models = t.gpus > 0 ? topology.MaskFor(value.second->models) : cluster::kAnyModel;
    list.push_back({t, value.first});
  }
  return sched::WorkloadProfile::FromCounts(std::move(list), 0.95);
}

sched::GangRequest PodRequest(const OpenbPod& pod, const cluster::Topology& topology) {
  sched::TaskShape s;
  s.milli_cpu = pod.milli_cpu;
  s.memory_mib = pod.memory_mib;
  if (pod.NeedsGpu()) {
    const bool shared = pod.gpu_milli < cluster::kMilliPerGpu;
    s.kind = shared ? job::GpuKind::kShared : job::GpuKind::kWhole;
    s.gpus = shared ? 1 : pod.num_gpu;
    s.milli = pod.gpu_milli;
    s.models = topology.MaskFor(pod.models);
  }
  return sched::MakeSingleTaskRequest(s);
}

StatusOr<RunResult> RunProtocol(const OpenbTrace& trace, const RunOptions& options) {
  const int64_t capacity = trace.capacity_milli();
  const RunPlan plan = DrawRunPlan(trace.pods, static_cast<int32_t>(trace.nodes.size()), capacity,
                                   options.seed, options.tune);
  HANGAR_ASSIGN_OR_RETURN(auto topology, BuildPriorityCluster(trace.nodes, plan.node_priority));
  sched::SchedulerConfig config;
  config.placement_policy = options.policy;
  config.backfill = sched::BackfillMode::kNone;
  HANGAR_ASSIGN_OR_RETURN(auto scheduler, sched::Scheduler::Create(config));

  const sched::WorkloadProfile profile = TypicalPods(trace.pods, *topology);
  std::vector<sched::GangRequest> requests;
  requests.reserve(trace.pods.size());
  for (const auto& p : trace.pods) requests.push_back(PodRequest(p, *topology));

  cluster::ClusterUsage usage(topology);
  ClusterFragmentation frag(usage, profile);
  DiscreteCurves curves(capacity);
  RunResult result;
  result.seed = options.seed;
  int64_t min_gpu_pod_cpu = INT64_MAX;
  for (const auto& p : trace.pods) {
    if (p.NeedsGpu()) min_gpu_pod_cpu = std::min(min_gpu_pod_cpu, p.milli_cpu);
  }
  int64_t arrived = 0, used = 0;
  for (int32_t k : plan.arrivals) {
    arrived += trace.pods[k].TotalMilliGpu();
    const uint64_t id = static_cast<uint64_t>(++result.pods);
    if (!PlaceOne(*scheduler, requests[k], profile, options.seed, id, usage, frag, &used)) {
      result.failed++;
    }
    curves.Add(arrived, used, frag.total_milli());
    if (!result.stranded_at_100 && arrived >= capacity) {
      MeasureStranding(usage, min_gpu_pod_cpu, &result);
    }
  }
  result.alloc = curves.Alloc();
  result.frag = curves.Frag();
  return result;
}

}  // namespace hangar::sim::fgd
