#include "sched/request.h"

#include <functional>

#include "common/version.h"

namespace hangar::sched {

int64_t TaskShape::MilliGpu() const {
  switch (kind) {
    case job::GpuKind::kNone:
      return 0;
    case job::GpuKind::kWhole:
      return int64_t{gpus} * cluster::kMilliPerGpu;
    case job::GpuKind::kShared:
      return milli;
    case job::GpuKind::kMig:
      return int64_t{milli} * cluster::kMilliPerGpu / cluster::kMigSlicesPerGpu;
  }
  return 0;
}

void TaskShape::SetMigProfile(std::string_view profile, int compute_slices, int64_t memory) {
  kind = job::GpuKind::kMig;
  gpus = 1;
  milli = compute_slices;
  gpu_memory_mib = memory;
  for (uint8_t p = 0; p < cluster::kMigParts; ++p) {
    auto shape = cluster::MigShapeOn(p, profile);
    mig_shape[p] = shape ? static_cast<uint8_t>(*shape) : cluster::kNoMigShape;
  }
}

std::string TaskShape::MigProfileName() const {
  for (uint8_t p = 0; p < cluster::kMigParts; ++p) {
    if (mig_shape[p] != cluster::kNoMigShape)
      return std::string(cluster::MigPartAt(p).profiles[mig_shape[p]]);
  }
  return "";
}

namespace {
uint64_t Mix(uint64_t h, uint64_t v) {
  h ^= v + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2);
  return h * 0xff51afd7ed558ccdULL;
}
}  // namespace

void Fingerprint(GangRequest* r) {
  uint64_t h = 1469598103934665603ULL;
  h = Mix(h, static_cast<uint64_t>(r->topology.same) * 2 + r->topology.required);
  for (const auto& g : r->groups) {
    const TaskShape& s = g.shape;
    for (uint64_t v :
         {static_cast<uint64_t>(s.kind), static_cast<uint64_t>(s.gpus),
          static_cast<uint64_t>(s.milli), static_cast<uint64_t>(s.gpu_memory_mib),
          static_cast<uint64_t>(s.min_gpu_memory_mib), static_cast<uint64_t>(s.milli_cpu),
          static_cast<uint64_t>(s.memory_mib), s.models, static_cast<uint64_t>(g.replicas)}) {
      h = Mix(h, v);
    }
    for (uint8_t m : s.mig_shape) h = Mix(h, m);
    for (const auto& [k, v] : g.selector) {
      h = Mix(h, std::hash<std::string>()(k));
      h = Mix(h, std::hash<std::string>()(v));
    }
    for (uint32_t n : g.excluded_nodes) h = Mix(h, n);
    h = Mix(h, static_cast<uint64_t>(g.max_per_node));
    h = Mix(h, g.agent_needs);
  }
  for (uint32_t n : r->nodes.required) h = Mix(h, uint64_t{n} + (uint64_t{1} << 32));
  h = Mix(h, r->nodes.required_missing);
  r->fingerprint = h;
  r->total_milli_gpu = 0;
  r->total_whole_gpus = 0;
  r->total_replicas = 0;
  for (const auto& g : r->groups) {
    r->total_milli_gpu += g.shape.MilliGpu() * g.replicas;
    if (g.shape.kind == job::GpuKind::kWhole)
      r->total_whole_gpus += int64_t{g.shape.gpus} * g.replicas;
    r->total_replicas += g.replicas;
  }
}

namespace {
bool SameShape(const TaskShape& a, const TaskShape& b) {
  return a.kind == b.kind && a.gpus == b.gpus && a.milli == b.milli &&
         a.gpu_memory_mib == b.gpu_memory_mib && a.min_gpu_memory_mib == b.min_gpu_memory_mib &&
         a.milli_cpu == b.milli_cpu && a.memory_mib == b.memory_mib && a.models == b.models &&
         a.mig_shape == b.mig_shape;
}
}  // namespace

bool SamePlacement(const GangRequest& a, const GangRequest& b) {
  if (a.topology.same != b.topology.same || a.topology.required != b.topology.required)
    return false;
  if (a.groups.size() != b.groups.size() || !(a.nodes == b.nodes)) return false;
  for (size_t i = 0; i < a.groups.size(); ++i) {
    const GroupRequest &x = a.groups[i], &y = b.groups[i];
    if (x.replicas != y.replicas || x.selector != y.selector ||
        x.excluded_nodes != y.excluded_nodes || x.max_per_node != y.max_per_node ||
        x.agent_needs != y.agent_needs || !SameShape(x.shape, y.shape)) {
      return false;
    }
  }
  return true;
}

GangRequest MakeSingleTaskRequest(const TaskShape& shape, int32_t replicas,
                                  job::TopologyConstraint topology) {
  GangRequest r;
  r.groups.push_back({shape, replicas, {}});
  r.topology = topology;
  Fingerprint(&r);
  return r;
}

StatusOr<GangRequest> CompileGang(const job::JobSpec& spec, const cluster::Topology& topology) {
  HANGAR_RETURN_IF_ERROR(job::ValidateJobSpec(spec));
  GangRequest r;
  r.topology = spec.topology;
  r.nodes = CompileNodeRule(spec.nodes, topology);
  for (const auto& t : spec.tasks) {
    GroupRequest g;
    g.replicas = t.replicas;
    g.selector = t.node_selector;
    g.excluded_nodes = r.nodes.excluded;
    g.max_per_node = t.max_per_node;
    if (spec.terminal || spec.stdin_open) g.agent_needs = Bit(AgentFeature::kTerminals);
    TaskShape& s = g.shape;
    s.kind = t.gpu.kind;
    s.gpus = t.gpu.kind == job::GpuKind::kNone ? 0 : t.gpu.count;
    switch (t.gpu.kind) {
      case job::GpuKind::kNone:
        break;
      case job::GpuKind::kWhole:
        s.milli = cluster::kMilliPerGpu;
        break;
      case job::GpuKind::kShared:
        s.milli = static_cast<int32_t>(t.gpu.milli);
        s.gpu_memory_mib = t.gpu.memory_mib;
        break;
      case job::GpuKind::kMig:
        s.SetMigProfile(t.gpu.mig_profile, t.gpu.mig_slices, t.gpu.memory_mib);
        break;
    }
    s.min_gpu_memory_mib = t.min_gpu_memory_mib;
    s.milli_cpu = t.ReplicaMilliCpu();
    s.memory_mib = t.ReplicaMemoryMiB();
    s.models = s.NeedsGpu() ? topology.MaskFor(t.gpu_models) : cluster::kAnyModel;
    r.groups.push_back(std::move(g));
  }
  Fingerprint(&r);
  return r;
}

}  // namespace hangar::sched
