#include "job/gpu_proportions.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "common/units.h"

namespace hangar::job {

namespace {

// The limits that apply to a group: those of the models it may run on.
std::vector<const cluster::GpuModelLimits*> LimitsFor(
    const std::vector<cluster::GpuModelLimits>& limits, const cluster::Topology& topology,
    const TaskGroupSpec& g) {
  std::vector<const cluster::GpuModelLimits*> out;
  for (const auto& l : limits) {
    const bool allowed =
        g.gpu_models.empty()
            ? std::find(topology.models().begin(), topology.models().end(), l.model) !=
                  topology.models().end()
            : std::find(g.gpu_models.begin(), g.gpu_models.end(), l.model) != g.gpu_models.end();
    if (allowed) out.push_back(&l);
  }
  return out;
}

struct Resource {
  const char* what;     // "CPU" or "memory"
  const char* per_gpu;  // the job file's per-GPU field
  const char* total;    // and its per-replica field
  int64_t TaskGroupSpec::*per_gpu_field;
  int64_t TaskGroupSpec::*total_field;
  int64_t cluster::GpuModelLimits::*default_field;
  int64_t cluster::GpuModelLimits::*max_field;
  std::string (*format)(int64_t);
};

std::string Cores(int64_t milli) { return FormatMilli(milli) + " cores"; }

const Resource kCpu{"CPU",
                    "cpu_per_gpu",
                    "cpu",
                    &TaskGroupSpec::cpu_per_gpu,
                    &TaskGroupSpec::cpu,
                    &cluster::GpuModelLimits::default_milli_cpu_per_gpu,
                    &cluster::GpuModelLimits::max_milli_cpu_per_gpu,
                    &Cores};
const Resource kMemory{"memory",
                       "memory_per_gpu",
                       "memory",
                       &TaskGroupSpec::memory_per_gpu,
                       &TaskGroupSpec::memory,
                       &cluster::GpuModelLimits::default_memory_mib_per_gpu,
                       &cluster::GpuModelLimits::max_memory_mib_per_gpu,
                       &FormatMemoryMiB};

// The names of the models in `ls` whose maximum allows `asked` per GPU.
std::string ModelsAllowing(const std::vector<const cluster::GpuModelLimits*>& ls, const Resource& r,
                           int64_t asked) {
  std::string out;
  for (const auto* l : ls) {
    if (!(l->*r.max_field) || asked <= l->*r.max_field) out += (out.empty() ? "" : ", ") + l->model;
  }
  return out;
}

Status ApplyOne(const std::vector<const cluster::GpuModelLimits*>& ls, const Resource& r,
                TaskGroupSpec* g) {
  const int64_t milli_gpu = g->ReplicaMilliGpu();
  if (milli_gpu <= 0) return Status::Ok();
  if (g->*r.per_gpu_field == 0 && g->*r.total_field == 0) {
    int64_t def = INT64_MAX;
    for (const auto* l : ls) def = std::min(def, l->*r.default_field);
    if (g->gpu.kind == GpuKind::kWhole) {
      g->*r.per_gpu_field = def;
    } else {
      g->*r.total_field =
          static_cast<int64_t>(std::llround(static_cast<double>(def) * milli_gpu / 1000.0));
    }
    return Status::Ok();
  }
  const int64_t total = g->*r.total_field + g->*r.per_gpu_field * g->GpusPerReplica();
  const int64_t asked =
      static_cast<int64_t>(std::llround(static_cast<double>(total) * 1000.0 / milli_gpu));
  const cluster::GpuModelLimits* tightest = nullptr;
  for (const auto* l : ls) {
    const int64_t max = l->*r.max_field;
    if (max && asked > max && (!tightest || max < tightest->*r.max_field)) tightest = l;
  }
  if (!tightest) return Status::Ok();
  const std::string allowing = ModelsAllowing(ls, r, asked);
  const std::string share =
      g->gpu.kind == GpuKind::kWhole ? "" : " (a share counts as its fraction of a GPU)";
  return Status::InvalidArgument(
      "task group '" + g->name + "' asks for " + r.format(asked) + " of " + r.what + " per GPU" +
      share + ", above the most a " + tightest->model + " GPU may have (" + r.per_gpu +
      " at most " + r.format(tightest->*r.max_field) + ", max_" +
      (r.what == std::string("CPU") ? "cpu" : "memory") +
      "_per_gpu in the cluster's gpu_models); ask for at most " + r.format(tightest->*r.max_field) +
      " per GPU" +
      (allowing.empty() ? std::string(", or use more GPUs")
                        : ", or limit gpu_models to models that allow it (" + allowing + ")"));
}

}  // namespace

Status ApplyGpuModelLimits(const std::vector<cluster::GpuModelLimits>& limits,
                           const cluster::Topology& topology, JobSpec* spec) {
  if (limits.empty()) return Status::Ok();
  for (TaskGroupSpec& g : spec->tasks) {
    if (g.gpu.kind == GpuKind::kNone) continue;
    const auto ls = LimitsFor(limits, topology, g);
    if (ls.empty()) continue;
    HANGAR_RETURN_IF_ERROR(ApplyOne(ls, kCpu, &g));
    HANGAR_RETURN_IF_ERROR(ApplyOne(ls, kMemory, &g));
  }
  return Status::Ok();
}

}  // namespace hangar::job
