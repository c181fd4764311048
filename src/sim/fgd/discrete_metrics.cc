#include "sim/fgd/discrete_metrics.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>

namespace hangar::sim::fgd {

double PairwiseSum(std::span<const double> v) {
  const size_t n = v.size();
  if (n < 8) {
    double s = 0;
    for (double x : v) s += x;
    return s;
  }
  if (n <= 128) {
    double r[8];
    for (int j = 0; j < 8; ++j) r[j] = v[j];
    size_t i = 8;
    for (; i < n - n % 8; i += 8) {
      for (int j = 0; j < 8; ++j) r[j] += v[i + j];
    }
    double s = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]));
    for (; i < n; ++i) s += v[i];
    return s;
  }
  size_t half = n / 2;
  half -= half % 8;
  return PairwiseSum(v.first(half)) + PairwiseSum(v.subspan(half));
}

double NpRound2(double x) { return std::rint(x * 100.0) / 100.0; }

double PyRound2(double x) {
  // printf rounds the exact binary value correctly (ties to even), as Python's round does.
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.2f", x);
  return std::strtod(buf, nullptr);
}

void DiscreteCurves::Add(int64_t arrived_milli, int64_t used_milli, double frag_milli) {
  const double gpus = static_cast<double>(capacity_milli_) / 1000.0;
  arrive_.push_back(
      static_cast<int32_t>(std::nearbyint(static_cast<double>(arrived_milli) / gpus / 10.0)));
  alloc_.push_back(PyRound2(static_cast<double>(used_milli) / gpus / 10.0));
  frag_.push_back(PyRound2(frag_milli));  // the simulator logs it with %.2f
}

Curve DiscreteCurves::Alloc() const { return Columns(alloc_, 0); }

Curve DiscreteCurves::Frag() const {
  return Columns(frag_, static_cast<double>(capacity_milli_) / 1000.0);
}

// `gpus` > 0 turns a mean fragmentation in milli-GPU into % of the cluster's GPUs.
Curve DiscreteCurves::Columns(const std::vector<double>& values, double gpus) const {
  Curve out;
  std::vector<double> pick;
  for (int k = 0; k < kColumns; ++k) {
    for (int width : {0, 1}) {
      pick.clear();
      for (size_t i = 0; i < arrive_.size(); ++i) {
        if (arrive_[i] >= k - width && arrive_[i] <= k + width) pick.push_back(values[i]);
      }
      if (!pick.empty()) break;
    }
    if (pick.empty()) continue;
    const double mean = (0.0 + PairwiseSum(pick)) / static_cast<double>(pick.size());
    out[k] = NpRound2(gpus > 0 ? 100.0 * mean / 1000.0 / gpus : mean);
  }
  return out;
}

}  // namespace hangar::sim::fgd
