#include "sched/placement/fgd_scorer.h"

#include "sched/placement/node_fit.h"

namespace hangar::sched::placement {

using cluster::ClusterUsage;
using cluster::NodeInfo;

uint64_t Hash3(uint64_t a, uint64_t b, uint64_t c) {
  uint64_t h = a * 0x9e3779b97f4a7c15ULL ^ (b + 0x632be59bd9b4e019ULL) * 0xbf58476d1ce4e5b9ULL;
  h ^= (c + 0x94d049bb133111ebULL) * 0xd6e8feb86659fd93ULL;
  h ^= h >> 31;
  h *= 0x94d049bb133111ebULL;
  return h ^ (h >> 29);
}

void ApplyShape(std::vector<int32_t>* free, const TaskShape& s, int local) {
  if (s.kind == job::GpuKind::kShared) {
    (*free)[local] -= s.milli;
  } else if (s.kind == job::GpuKind::kWhole) {
    int need = s.gpus;
    for (auto& f : *free) {
      if (need > 0 && f >= cluster::kMilliPerGpu) f -= cluster::kMilliPerGpu, --need;
    }
  }
}

uint64_t ShapeKey(const TaskShape& s) {
  return Hash3(static_cast<uint64_t>(s.kind) << 32 | static_cast<uint32_t>(s.gpus),
               static_cast<uint64_t>(s.milli), static_cast<uint64_t>(s.milli_cpu)) ^
         static_cast<uint64_t>(s.gpu_memory_mib) * 31;
}

const ScoreMemo::Entry* ScoreMemo::Find(const ClusterUsage& u, uint32_t n, uint64_t profile,
                                        uint64_t shape) {
  Slot& slot = Get(u, n, profile);
  for (const auto& e : slot.entries) {
    if (e.shape == shape) return &e;
  }
  return nullptr;
}

void ScoreMemo::Put(const ClusterUsage& u, uint32_t n, uint64_t profile, Entry e) {
  Get(u, n, profile).entries.push_back(e);
}

ScoreMemo::Slot& ScoreMemo::Get(const ClusterUsage& u, uint32_t n, uint64_t profile) {
  if (slots_.size() < u.topology().nodes().size()) slots_.resize(u.topology().nodes().size());
  Slot& s = slots_[n];
  if (s.stamp != u.node_stamp(n) || s.profile != profile) {
    s.stamp = u.node_stamp(n);
    s.profile = profile;
    s.entries.clear();
  }
  return s;
}

int64_t FgdScorer::Score(const ScoreContext& ctx, uint32_t n, const TaskShape& s,
                         uint32_t* gpu) const {
  if (!ctx.profile || ctx.profile->empty()) return 50;  // no workload known: every node ties
  const ClusterUsage& u = *ctx.usage;
  const uint64_t key = ShapeKey(s);
  if (const auto* e = memo_.Find(u, n, ctx.profile->id(), key)) {
    *gpu = e->gpu;
    return e->score;
  }
  ScoreMemo::Entry e{key, 0, kNoGpu};
  e.score = Compute(ctx, n, s, &e.gpu);
  memo_.Put(u, n, ctx.profile->id(), e);
  *gpu = e.gpu;
  return e.score;
}

double FgdScorer::Before(const ScoreContext& ctx, uint32_t n) const {
  const ClusterUsage& u = *ctx.usage;
  const NodeInfo& node = u.topology().nodes()[n];
  FreeMilliOf(u, n, &free_);
  NodeView v{u.node(n).free_cpu, node.num_gpus > 0, node.model, free_};
  return NodeFragmentation(*ctx.profile, v);
}

double FgdScorer::Delta(const ScoreContext& ctx, uint32_t n, const TaskShape& s, int local,
                        double before) const {
  const ClusterUsage& u = *ctx.usage;
  const NodeInfo& node = u.topology().nodes()[n];
  after_ = free_;
  ApplyShape(&after_, s, local);
  NodeView v{u.node(n).free_cpu - s.milli_cpu, node.num_gpus > 0, node.model, after_};
  return before - NodeFragmentation(*ctx.profile, v);
}

int64_t FgdScorer::Compute(const ScoreContext& ctx, uint32_t n, const TaskShape& s,
                           uint32_t* gpu) const {
  const ClusterUsage& u = *ctx.usage;
  const NodeInfo& node = u.topology().nodes()[n];
  const double before = Before(ctx, n);
  if (s.kind != job::GpuKind::kShared) return Sigmoid(Delta(ctx, n, s, 0, before));
  int64_t best = -1;
  for (uint32_t g = node.first_gpu; g < node.first_gpu + node.num_gpus; ++g) {
    if (!GpuFitsShared(u, g, s)) continue;
    const int64_t score = Sigmoid(Delta(ctx, n, s, static_cast<int>(g - node.first_gpu), before));
    if (score > best) best = score, *gpu = g;
  }
  return best;
}

}  // namespace hangar::sched::placement
