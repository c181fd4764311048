// Hangar's default placement policy. It starts from FGD's insight (measure fragmentation against
// the workload that is actually arriving) and adds what FGD leaves to chance: among equally good
// fragmentation outcomes it packs, so free capacity stays together on few nodes and whole GPUs.
#include <algorithm>

#include "sched/placement/fgd_scorer.h"
#include "sched/placement/node_fit.h"

namespace hangar::sched::placement {

using cluster::ClusterUsage;

namespace {

class HangarScorer final : public FgdScorer {
 public:
  std::string_view name() const override { return "hangar"; }
  int64_t Score(const ScoreContext& ctx, uint32_t n, const TaskShape& s,
                uint32_t* gpu) const override {
    const ClusterUsage& u = *ctx.usage;
    int64_t frag = 50;
    if (ctx.profile && !ctx.profile->empty()) frag = FgdScorer::Score(ctx, n, s, gpu);
    if (*gpu == kNoGpu && (s.kind == job::GpuKind::kShared || s.kind == job::GpuKind::kMig)) {
      *gpu = BestFitSharedGpu(u, n, s);
    }
    // Packing: fewer free whole GPUs left, then less free share left, wins.
    const int64_t whole_left = u.node(n).free_whole;
    const int64_t milli_left = u.node(n).free_milli - s.MilliGpu();
    const int64_t pack = (64 - whole_left) * 100'000 + (100'000 - milli_left);
    return frag * 100'000'000 + pack;
  }
};

}  // namespace

std::unique_ptr<NodeScorer> MakeHangarScorer() { return std::make_unique<HangarScorer>(); }

}  // namespace hangar::sched::placement
