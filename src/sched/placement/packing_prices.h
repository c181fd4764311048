// Packing prices for GPU-sharing tasks: what each sharing size is worth when the workload's
// sharing tasks are packed onto GPUs as tightly as their mix allows.
//
// Packing a mix of sizes onto the fewest GPUs is a bin-packing problem; its linear relaxation
// over packing patterns (Gilmore and Gomory's cutting-stock LP) has a dual with one price per
// size: the share of a GPU that one more task of that size costs. Every pattern's prices sum to
// at most one GPU, and the patterns an optimal packing uses sum to exactly one. So the prices say
// which sizes belong together: with many 470-milli tasks and few small ones, a 470 is worth half
// a GPU and two of them fill one; a 50-milli task that only ever fills leftovers is worth nothing.
//
// A placement of a task of size s on a GPU with f milli free gives up
//   Regret(f, s) = Packed(f) - Worth(s) - Packed(f - s) >= 0,
// where Packed(f) is the most that sizes fitting in f are worth: zero when s is part of the best
// way to fill f, and the worth the GPU can no longer collect otherwise. Opening a fresh GPU for
// an 810-milli task beside which only rare small tasks fit costs nothing (the 190 left was
// never worth anything); putting a 470 next to a 320 (210 left, which no 470, 320 or 230 can
// use) does.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "cluster/topology.h"

namespace hangar::sched::placement {

class PackingPrices {
 public:
  // `demand`: (milli per GPU, weight) for each sharing size (0 < milli < 1000); weights are
  // relative frequencies. Sizes outside (0, 1000) and weights <= 0 are ignored; repeated sizes
  // add up. Without any sharing size every price is 0.
  static PackingPrices Compute(std::span<const std::pair<int32_t, double>> demand);

  bool empty() const { return empty_; }
  // Share of a GPU, in milli, that a task of `milli` is worth (0 for sizes not in the demand).
  double Worth(int32_t milli) const;
  // The most that sharing tasks fitting in `free_milli` are worth, in milli.
  double Packed(int32_t free_milli) const;
  // What placing a task of `milli` on a GPU with `free_milli` free gives up, in milli (>= 0).
  double Regret(int32_t free_milli, int32_t milli) const;
  // GPUs per unit of demand weight in the LP's optimal packing (its objective).
  double gpus_per_weight() const { return gpus_per_weight_; }
  // Patterns the LP ended with (for tests and diagnostics).
  size_t patterns() const { return patterns_; }

 private:
  bool empty_ = true;
  std::array<double, cluster::kMilliPerGpu + 1> worth_{};
  std::array<double, cluster::kMilliPerGpu + 1> packed_{};
  double gpus_per_weight_ = 0;
  size_t patterns_ = 0;
};

// max c.y subject to rows[k].y <= 1 for every k and y >= 0, by the simplex method (Bland's
// rule). The origin is feasible since every bound is 1; `rows` must bound every y_i (a row with
// a positive entry for each i), else the result is not an optimum. Small dense problems only.
std::vector<double> MaximizeUnderUnitRows(const std::vector<double>& c,
                                          const std::vector<std::vector<double>>& rows);

}  // namespace hangar::sched::placement
