// Internal to placement/: FGD's scorer and the pieces other scorers build on.
#pragma once

#include <cmath>
#include <cstdint>
#include <vector>

#include "sched/placement/scorer.h"

namespace hangar::sched::placement {

uint64_t Hash3(uint64_t a, uint64_t b, uint64_t c);

// Applies one replica of `s` to a node's free list the way FGD's simulator does: a shared shape
// takes from GPU index `local` (within the node); whole GPUs come from the fully free GPUs,
// lowest index first.
void ApplyShape(std::vector<int32_t>* free, const TaskShape& s, int local);

uint64_t ShapeKey(const TaskShape& s);

// Memo of a scorer's answers per node state and shape; valid while (stamp, profile) hold.
class ScoreMemo {
 public:
  struct Entry {
    uint64_t shape = 0;
    int64_t score = 0;
    uint32_t gpu = kNoGpu;
  };
  const Entry* Find(const cluster::ClusterUsage& u, uint32_t n, uint64_t profile, uint64_t shape);
  void Put(const cluster::ClusterUsage& u, uint32_t n, uint64_t profile, Entry e);

 private:
  struct Slot {
    uint64_t stamp = 0, profile = 0;
    std::vector<Entry> entries;
  };
  Slot& Get(const cluster::ClusterUsage& u, uint32_t n, uint64_t profile);
  std::vector<Slot> slots_;
};

// 06-FGD: the node whose fragmentation (against the workload profile) drops the most, scored
// as FGD's integer sigmoid of the drop. Shared shapes try every GPU that fits; the lowest index
// reaching the node's best score is used.
class FgdScorer : public NodeScorer {
 public:
  std::string_view name() const override { return "fgd"; }
  int64_t Score(const ScoreContext& ctx, uint32_t n, const TaskShape& s,
                uint32_t* gpu) const override;

  static int64_t Sigmoid(double delta) {
    return static_cast<int64_t>(100.0 / (1.0 + std::exp(-delta / 1000.0)));
  }

 protected:
  // Fragmentation drop (milli-GPU) from placing one replica of s, on GPU-local index `local` for
  // shared shapes. `before` is F(n) now.
  double Delta(const ScoreContext& ctx, uint32_t n, const TaskShape& s, int local,
               double before) const;
  double Before(const ScoreContext& ctx, uint32_t n) const;
  int64_t Compute(const ScoreContext& ctx, uint32_t n, const TaskShape& s, uint32_t* gpu) const;

  mutable ScoreMemo memo_;
  mutable std::vector<int32_t> free_, after_;
};

}  // namespace hangar::sched::placement
