// The FGD analysis' discrete curves: one sample after every pod, then column k (0..130) is the
// mean of the samples taken while the arrived GPU request was k% of the cluster. The rounding
// and summation rules are the Python/numpy ones the published CSVs went through, so a faithful
// run reproduces them digit for digit.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

namespace hangar::sim::fgd {

inline constexpr int kColumns = 131;  // 0..130 % of cluster GPU capacity arrived

using Curve = std::array<std::optional<double>, kColumns>;  // nullopt: no sample near k

// numpy's pairwise summation of a float64 array (np.add.reduce), blocks of 8 and 128.
double PairwiseSum(std::span<const double> v);
// np.round(x, 2): rint(x * 100) / 100.
double NpRound2(double x);
// Python's round(x, 2): the correctly rounded two-decimal value, ties to even.
double PyRound2(double x);

// Collects the samples of one run and turns them into the published columns.
class DiscreteCurves {
 public:
  explicit DiscreteCurves(int64_t capacity_milli) : capacity_milli_(capacity_milli) {}

  // One sample: GPU request arrived so far (failed pods included), GPU allocated, and the
  // cluster's fragmentation, all in milli-GPU.
  void Add(int64_t arrived_milli, int64_t used_milli, double frag_milli);

  // Allocation rate (% of capacity) and fragmented GPU (% of capacity) per column.
  Curve Alloc() const;
  Curve Frag() const;
  size_t samples() const { return arrive_.size(); }

 private:
  Curve Columns(const std::vector<double>& values, double scale) const;

  int64_t capacity_milli_;
  std::vector<int32_t> arrive_;  // round-half-even percentage
  std::vector<double> alloc_;    // percent, Python-rounded to 2 decimals
  std::vector<double> frag_;     // milli-GPU, as logged with %.2f
};

}  // namespace hangar::sim::fgd
