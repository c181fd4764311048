#include "sched/placement/scorer.h"

#include <algorithm>
#include <cmath>
#include <unordered_map>

#include "sched/placement/fgd_scorer.h"
#include "sched/placement/node_fit.h"

namespace hangar::sched::placement {

using cluster::ClusterUsage;
using cluster::NodeInfo;

void FreeMilliOf(const ClusterUsage& u, uint32_t n, std::vector<int32_t>* out) {
  const NodeInfo& node = u.topology().nodes()[n];
  out->clear();
  for (uint32_t g = node.first_gpu; g < node.first_gpu + node.num_gpus; ++g) {
    const bool usable = u.gpu_available(g) && !u.topology().gpus()[g].mig;
    out->push_back(usable ? u.gpu_free_milli(g) : 0);
  }
}

namespace {

// FGD 05-BestFit: prefer the node left with the least CPU and GPU, each normalised by the
// largest node. Integer score 0..100 (truncated), as the published runs used.
class BestFitScorer final : public NodeScorer {
 public:
  std::string_view name() const override { return "best-fit"; }
  int64_t Score(const ScoreContext& ctx, uint32_t n, const TaskShape& s,
                uint32_t* gpu) const override {
    const ClusterUsage& u = *ctx.usage;
    const auto& t = u.topology();
    const double max_cpu = static_cast<double>(std::max<int64_t>(1, t.max_node_milli_cpu()));
    const double max_gpu =
        static_cast<double>(std::max(1, t.max_gpus_per_node()) * cluster::kMilliPerGpu);
    const double cpu_left = static_cast<double>(u.node(n).free_cpu - s.milli_cpu);
    const double gpu_left = static_cast<double>(u.node(n).free_milli - s.MilliGpu());
    const double left = cpu_left / max_cpu * 0.5 + gpu_left / max_gpu * 0.5;
    if (s.kind == job::GpuKind::kShared || s.kind == job::GpuKind::kMig)
      *gpu = BestFitSharedGpu(u, n, s);
    return static_cast<int64_t>((1.0 - left) * 100.0);
  }
};

// 01-Random: a uniformly random feasible node (and GPU).
class RandomScorer final : public NodeScorer {
 public:
  std::string_view name() const override { return "random"; }
  int64_t Score(const ScoreContext& ctx, uint32_t n, const TaskShape& s,
                uint32_t* gpu) const override {
    const uint64_t h = Hash3(ctx.seed, ctx.nonce, n);
    if (s.kind == job::GpuKind::kShared || s.kind == job::GpuKind::kMig) {
      const NodeInfo& node = ctx.usage->topology().nodes()[n];
      uint64_t best = 0;
      for (uint32_t g = node.first_gpu; g < node.first_gpu + node.num_gpus; ++g) {
        if (!GpuFitsShared(*ctx.usage, g, s)) continue;
        const uint64_t r = Hash3(h, g, 17);
        if (*gpu == kNoGpu || r > best) best = r, *gpu = g;
      }
    }
    return static_cast<int64_t>(h >> 2);
  }
};

}  // namespace

std::unique_ptr<NodeScorer> MakeHangarScorer();
std::unique_ptr<NodeScorer> MakeDotProductScorer();
std::unique_ptr<NodeScorer> MakeGpuClusteringScorer();
std::unique_ptr<NodeScorer> MakeGpuPackingScorer();

const std::vector<std::string_view>& ScorerNames() {
  static const std::vector<std::string_view> names = {
      "hangar", "best-fit", "fgd", "random", "dot-product", "gpu-clustering", "gpu-packing"};
  return names;
}

StatusOr<std::unique_ptr<NodeScorer>> MakeScorer(std::string_view name) {
  if (name == "best-fit") return std::unique_ptr<NodeScorer>(new BestFitScorer());
  if (name == "fgd") return std::unique_ptr<NodeScorer>(new FgdScorer());
  if (name == "random") return std::unique_ptr<NodeScorer>(new RandomScorer());
  if (name == "hangar") return MakeHangarScorer();
  if (name == "dot-product") return MakeDotProductScorer();
  if (name == "gpu-clustering") return MakeGpuClusteringScorer();
  if (name == "gpu-packing") return MakeGpuPackingScorer();
  std::string known;
  for (auto n : ScorerNames()) known += (known.empty() ? "" : ", ") + std::string(n);
  return Status::InvalidArgument("unknown placement policy '" + std::string(name) +
                                 "'; choose one of: " + known);
}

}  // namespace hangar::sched::placement
