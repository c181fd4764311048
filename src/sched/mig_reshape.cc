#include "sched/mig_reshape.h"

#include <algorithm>
#include <array>
#include <tuple>
#include <unordered_map>

#include "sched/placement/node_fit.h"

namespace hangar::sched {

using cluster::kMigMemorySlices;
using cluster::kMigParts;
using cluster::kMigShapes;
using cluster::kNoMigShape;
using cluster::MigLayout;
using cluster::MigShape;

uint8_t MigStartsToDestroy(const MigLayout& before, const MigLayout& after) {
  uint8_t starts = 0;
  for (int s = 0; s < kMigMemorySlices; ++s) {
    if (before.shape_at[s] != kNoMigShape && before.shape_at[s] != after.shape_at[s]) {
      starts |= static_cast<uint8_t>(1u << s);
    }
  }
  return starts;
}

uint8_t MigStartsToCreate(const MigLayout& before, const MigLayout& after) {
  return MigStartsToDestroy(after, before);
}

namespace {

// One cycle's planning: the GPUs that may be re-cut, what each plan has made of them so far, the
// CPU and memory the planned instances' replicas will need, and the instances already coming.
class Planner {
 public:
  Planner(const cluster::ClusterUsage& u, std::vector<MigReshapePlan>* out) : u_(u), out_(out) {}

  // False when no GPU may be re-cut (then there is nothing to plan).
  bool Collect();
  // Plans instances for job `job`'s MIG groups; false once the cycle's instance budget is spent.
  bool PlanJob(const PendingJob& job, int* budget);

 private:
  struct Choice {
    uint32_t gpu = UINT32_MAX;
    int start = -1;
    std::tuple<int, uint32_t, uint32_t> cost{INT32_MAX, UINT32_MAX, UINT32_MAX};
  };
  bool TakeSupply(const sched::TaskShape& s);
  Choice Best(const GroupRequest& g) const;
  void Consider(uint32_t g, const TaskShape& s, Choice* best) const;
  void Apply(const Choice& c, const GroupRequest& g, JobId job);
  const MigLayout& LayoutOf(uint32_t g) const {
    auto it = plan_of_.find(g);
    return it == plan_of_.end() ? *u_.gpu_mig_layout(g) : (*out_)[it->second].after;
  }

  const cluster::ClusterUsage& u_;
  std::vector<MigReshapePlan>* out_;
  std::vector<uint32_t> nodes_;                    // nodes with a GPU that may be re-cut
  std::unordered_map<uint32_t, size_t> plan_of_;   // GPU -> its plan in out_
  std::unordered_map<uint32_t, uint8_t> created_;  // GPU -> slices of instances planned now
  std::unordered_map<uint32_t, std::pair<int64_t, int64_t>> reserved_;  // node -> CPU, memory
  std::array<std::array<int32_t, kMigShapes>, kMigParts> supply_{};
};

bool ReshapeableGpu(const cluster::ClusterUsage& u, uint32_t g) {
  return u.topology().gpus()[g].mig && u.gpu_available(g) && u.gpu_mig_layout(g) != nullptr &&
         !u.gpu_mig_fixed(g) && !u.gpu_mig_reshaping(g);
}

bool Planner::Collect() {
  const cluster::Topology& t = u_.topology();
  for (uint32_t n = 0; n < t.nodes().size(); ++n) {
    const cluster::NodeInfo& node = t.nodes()[n];
    if (!u_.node(n).condition.schedulable) continue;
    bool any = false;
    for (uint32_t g = node.first_gpu; g < node.first_gpu + node.num_gpus; ++g) {
      const cluster::GpuInfo& gi = t.gpus()[g];
      if (gi.mig && u_.gpu_mig_reshaping(g) && u_.gpu_mig_layout(g) != nullptr) {
        // A reshape in flight: its free instances are on their way.
        const MigLayout& l = *u_.gpu_mig_layout(g);
        for (int s = 0; s < kMigMemorySlices; ++s) {
          const uint8_t sh = l.shape_at[s];
          if (sh == kNoMigShape) continue;
          if (cluster::MigPlacementMask(static_cast<MigShape>(sh), s) & u_.gpu_mig_taken(g))
            continue;
          ++supply_[gi.mig_part][sh];
        }
      }
      any = any || ReshapeableGpu(u_, g);
    }
    if (any) nodes_.push_back(n);
  }
  return !nodes_.empty();
}

bool Planner::TakeSupply(const TaskShape& s) {
  for (int p = 0; p < kMigParts; ++p) {
    const uint8_t sh = s.mig_shape[p];
    if (sh != kNoMigShape && supply_[p][sh] > 0) {
      --supply_[p][sh];
      return true;
    }
  }
  return false;
}

// The cost of one more instance of s's shape on GPU g: first how many compute slices of idle
// instances it destroys, then how much of the GPU's future it takes (MigLayoutValue), then g.
void Planner::Consider(uint32_t g, const TaskShape& s, Choice* best) const {
  const auto shape = static_cast<MigShape>(placement::MigShapeFor(u_.topology(), g, s));
  const MigLayout& l = LayoutOf(g);
  const uint8_t created = l.Mask();
  int start = cluster::MigBestStart(created, shape);
  uint8_t base = created;
  int destroyed = 0;
  if (start < 0) {  // no free slices for it: destroy idle instances, never busy or new ones
    auto it = created_.find(g);
    base = u_.gpu_mig_taken(g) | (it == created_.end() ? 0 : it->second);
    start = cluster::MigBestStart(base, shape);
    if (start < 0) return;
    const uint8_t starts = l.StartsOverlapping(cluster::MigPlacementMask(shape, start));
    for (int s2 = 0; s2 < kMigMemorySlices; ++s2) {
      if (starts >> s2 & 1)
        destroyed += cluster::ShapeInfo(static_cast<MigShape>(l.shape_at[s2])).compute_slices;
    }
  }
  const uint32_t lost = cluster::MigLayoutValue(base) -
                        cluster::MigLayoutValue(base | cluster::MigPlacementMask(shape, start));
  const auto cost = std::make_tuple(destroyed, lost, g);
  if (cost < best->cost) *best = Choice{g, start, cost};
}

Planner::Choice Planner::Best(const GroupRequest& group) const {
  const cluster::Topology& t = u_.topology();
  const TaskShape& s = group.shape;
  Choice best;
  for (uint32_t n : nodes_) {
    if (placement::CheckNodeStatic(t, n, group) != placement::FitFailure::kFits) continue;
    auto r = reserved_.find(n);
    const int64_t cpu = r == reserved_.end() ? 0 : r->second.first;
    const int64_t mem = r == reserved_.end() ? 0 : r->second.second;
    if (u_.node(n).free_cpu - cpu < s.milli_cpu || u_.node(n).free_memory - mem < s.memory_mib)
      continue;
    const cluster::NodeInfo& node = t.nodes()[n];
    for (uint32_t g = node.first_gpu; g < node.first_gpu + node.num_gpus; ++g) {
      if (ReshapeableGpu(u_, g) && u_.topology().gpus()[g].memory_mib >= s.min_gpu_memory_mib) {
        Consider(g, s, &best);
      }
    }
  }
  return best;
}

void Planner::Apply(const Choice& c, const GroupRequest& group, JobId job) {
  auto it = plan_of_.find(c.gpu);
  if (it == plan_of_.end()) {
    MigReshapePlan p;
    p.gpu = c.gpu;
    p.before = *u_.gpu_mig_layout(c.gpu);
    p.after = p.before;
    p.for_job = job;
    out_->push_back(p);
    it = plan_of_.emplace(c.gpu, out_->size() - 1).first;
  }
  MigLayout& after = (*out_)[it->second].after;
  const auto shape =
      static_cast<MigShape>(placement::MigShapeFor(u_.topology(), c.gpu, group.shape));
  const uint8_t mask = cluster::MigPlacementMask(shape, c.start);
  const uint8_t gone = after.StartsOverlapping(mask);
  for (int s = 0; s < kMigMemorySlices; ++s) {
    if (gone >> s & 1) after.Remove(s);
  }
  after.Add(shape, c.start);
  created_[c.gpu] |= mask;
  auto& r = reserved_[u_.topology().gpus()[c.gpu].node];
  r.first += group.shape.milli_cpu;
  r.second += group.shape.memory_mib;
}

bool Planner::PlanJob(const PendingJob& job, int* budget) {
  for (const GroupRequest& group : job.request->groups) {
    if (group.shape.kind != job::GpuKind::kMig) continue;
    for (int32_t r = 0; r < group.replicas; ++r) {
      if (TakeSupply(group.shape)) continue;
      if (*budget <= 0) return false;
      const Choice c = Best(group);
      if (c.gpu == UINT32_MAX) return true;  // no GPU can be cut for it: the next job may differ
      Apply(c, group, job.id);
      --*budget;
    }
  }
  return true;
}

}  // namespace

void PlanMigReshapes(const cluster::ClusterUsage& u, const Snapshot& snap,
                     std::span<const uint32_t> pending, const MigReshapeLimits& limits,
                     std::vector<MigReshapePlan>* out) {
  Planner planner(u, out);
  if (!planner.Collect()) return;
  int budget = limits.max_instances;
  int jobs = 0;
  for (uint32_t idx : pending) {
    const PendingJob& job = snap.pending[idx];
    if (jobs++ >= limits.max_jobs) break;
    if (!planner.PlanJob(job, &budget)) break;
  }
}

}  // namespace hangar::sched
