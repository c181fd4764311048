// The baseline policies of the FGD paper's evaluation, re-implemented from their published
// descriptions: 02-DotProd, 03-GpuClustering and 04-GpuPacking. All three choose a shared GPU by
// best fit and whole GPUs by lowest index, as the paper's runs did.
#include <algorithm>

#include "sched/placement/node_fit.h"
#include "sched/placement/scorer.h"

namespace hangar::sched::placement {

using cluster::ClusterUsage;
using cluster::NodeInfo;

namespace {

void PickSharedGpu(const ScoreContext& ctx, uint32_t n, const TaskShape& s, uint32_t* gpu) {
  if (s.kind == job::GpuKind::kShared || s.kind == job::GpuKind::kMig) {
    *gpu = BestFitSharedGpu(*ctx.usage, n, s);
  }
}

int64_t MaxNodeMilli(const cluster::Topology& t) {
  return std::max<int64_t>(1, t.max_gpus_per_node()) * cluster::kMilliPerGpu;
}

// Prefers the node whose free (CPU, GPU) vector, scaled by the largest node, has the smallest
// dot product with the task's request: the fullest node in the request's direction.
class DotProductScorer final : public NodeScorer {
 public:
  std::string_view name() const override { return "dot-product"; }
  int64_t Score(const ScoreContext& ctx, uint32_t n, const TaskShape& s,
                uint32_t* gpu) const override {
    const ClusterUsage& u = *ctx.usage;
    PickSharedGpu(ctx, n, s, gpu);
    if (u.node(n).free_cpu < s.milli_cpu) return 0;
    const double max_cpu =
        static_cast<double>(std::max<int64_t>(1, u.topology().max_node_milli_cpu()));
    const double max_gpu = static_cast<double>(MaxNodeMilli(u.topology()));
    const double d = static_cast<double>(u.node(n).free_cpu) / max_cpu *
                         (static_cast<double>(s.milli_cpu) / max_cpu) +
                     static_cast<double>(u.node(n).free_milli) / max_gpu *
                         (static_cast<double>(s.MilliGpu()) / max_gpu);
    return static_cast<int64_t>(100.0 * (1.0 - d / 2.0));
  }
};

// Puts a task with tasks of its own kind (shared, 1-GPU, 2-GPU, ...): 75 when the node holds
// only its kind, 50 with others too, 25 when empty, 0 when it holds only other kinds; plus up to
// 25 the fuller the node's GPUs are.
class GpuClusteringScorer final : public NodeScorer {
 public:
  std::string_view name() const override { return "gpu-clustering"; }
  int64_t Score(const ScoreContext& ctx, uint32_t n, const TaskShape& s,
                uint32_t* gpu) const override {
    const ClusterUsage& u = *ctx.usage;
    PickSharedGpu(ctx, n, s, gpu);
    if (!s.NeedsGpu()) return 0;
    const int mine =
        cluster::TaskClassOf(s.gpus, s.kind == job::GpuKind::kShared, s.kind == job::GpuKind::kMig);
    bool has_mine = false, has_other = false;
    for (int c = 0; c < cluster::kTaskClasses; ++c) {
      if (u.node(n).task_classes[c] == 0) continue;
      (c == mine ? has_mine : has_other) = true;
    }
    int64_t base = has_mine ? (has_other ? 50 : 75) : (has_other ? 0 : 25);
    const int64_t max_milli = MaxNodeMilli(u.topology());
    return base + 25 * (max_milli - u.node(n).free_milli) / max_milli;
  }
};

// Packs GPU tasks onto partly used GPUs: highest when the task fits on GPUs already in use (the
// fuller the better), then on a partly used node's free GPUs, and last on an empty node (smaller
// nodes first).
class GpuPackingScorer final : public NodeScorer {
 public:
  std::string_view name() const override { return "gpu-packing"; }
  int64_t Score(const ScoreContext& ctx, uint32_t n, const TaskShape& s,
                uint32_t* gpu) const override {
    const ClusterUsage& u = *ctx.usage;
    PickSharedGpu(ctx, n, s, gpu);
    if (!s.NeedsGpu() || s.kind == job::GpuKind::kMig) return 0;
    const NodeInfo& node = u.topology().nodes()[n];
    const int total = node.num_gpus;
    if (u.node(n).free_whole == total) return std::max(33 - total, total);
    std::vector<std::pair<int32_t, uint32_t>> by_free;  // (free, index), stable by index
    for (uint32_t g = node.first_gpu; g < node.first_gpu + node.num_gpus; ++g) {
      if (u.gpu_available(g)) by_free.emplace_back(u.gpu_free_milli(g), g);
    }
    std::stable_sort(by_free.begin(), by_free.end(),
                     [](const auto& a, const auto& b) { return a.first < b.first; });
    int taken = 0, fully_free = 0;
    int64_t sum = 0;
    for (const auto& [free, g] : by_free) {
      if (taken == s.gpus) break;
      if (free < s.milli) continue;
      ++taken;
      fully_free += free == cluster::kMilliPerGpu;
      sum += free * 100 / cluster::kMilliPerGpu;
    }
    if (taken < s.gpus) return 0;
    if (fully_free > 0) return std::max(50 - fully_free, 33);
    return std::max<int64_t>(100 - sum / 10, 50);
  }
};

}  // namespace

std::unique_ptr<NodeScorer> MakeDotProductScorer() { return std::make_unique<DotProductScorer>(); }
std::unique_ptr<NodeScorer> MakeGpuClusteringScorer() {
  return std::make_unique<GpuClusteringScorer>();
}
std::unique_ptr<NodeScorer> MakeGpuPackingScorer() { return std::make_unique<GpuPackingScorer>(); }

}  // namespace hangar::sched::placement
