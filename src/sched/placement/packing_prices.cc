#include "sched/placement/packing_prices.h"

#include <algorithm>
#include <map>

namespace hangar::sched::placement {

namespace {

constexpr int kCap = static_cast<int>(cluster::kMilliPerGpu);
constexpr double kEps = 1e-12;
// Column generation stops once no pattern is overrated by more than this (a GPU's share)...
constexpr double kTolerance = 1e-9;
// ...or after this many patterns were added (a few dozen suffice for openb's ~20 sizes).
constexpr int kMaxRounds = 500;

}  // namespace

std::vector<double> MaximizeUnderUnitRows(const std::vector<double>& c,
                                          const std::vector<std::vector<double>>& rows) {
  const size_t n = c.size(), m = rows.size();
  // Tableau rows [A | I | b] with the slacks as the first basis, and the objective row below.
  const size_t width = n + m + 1;
  std::vector<double> t((m + 1) * width, 0.0);
  auto at = [&](size_t r, size_t col) -> double& { return t[r * width + col]; };
  std::vector<size_t> basis(m);
  for (size_t r = 0; r < m; ++r) {
    for (size_t j = 0; j < n; ++j) at(r, j) = rows[r][j];
    at(r, n + r) = 1;
    at(r, width - 1) = 1;
    basis[r] = n + r;
  }
  for (size_t j = 0; j < n; ++j) at(m, j) = -c[j];
  // Bland's rule cannot cycle; the bound on pivots is only a guard.
  for (size_t pivots = 0; pivots < 50 * (n + m) + 1000; ++pivots) {
    size_t enter = width;
    for (size_t j = 0; j + 1 < width && enter == width; ++j) {
      if (at(m, j) < -kEps) enter = j;
    }
    if (enter == width) break;  // optimal
    size_t leave = m;
    double best = 0;
    for (size_t r = 0; r < m; ++r) {
      if (at(r, enter) <= kEps) continue;
      const double ratio = at(r, width - 1) / at(r, enter);
      if (leave == m || ratio < best - kEps || (ratio <= best + kEps && basis[r] < basis[leave])) {
        leave = r;
        best = ratio;
      }
    }
    if (leave == m) break;  // unbounded in this direction: the caller's rows did not bound y
    const double pivot = at(leave, enter);
    for (size_t j = 0; j < width; ++j) at(leave, j) /= pivot;
    for (size_t r = 0; r <= m; ++r) {
      const double f = at(r, enter);
      if (r == leave || f == 0) continue;
      for (size_t j = 0; j < width; ++j) at(r, j) -= f * at(leave, j);
    }
    basis[leave] = enter;
  }
  std::vector<double> y(n, 0.0);
  for (size_t r = 0; r < m; ++r) {
    if (basis[r] < n) y[basis[r]] = at(r, width - 1);
  }
  return y;
}

PackingPrices PackingPrices::Compute(std::span<const std::pair<int32_t, double>> demand) {
  PackingPrices out;
  std::map<int32_t, double> by_size;
  for (const auto& [milli, weight] : demand) {
    if (milli > 0 && milli < kCap && weight > 0) by_size[milli] += weight;
  }
  if (by_size.empty()) return out;
  std::vector<int32_t> size;
  std::vector<double> weight;
  for (const auto& [milli, w] : by_size) size.push_back(milli), weight.push_back(w);
  const size_t n = size.size();

  // The dual LP: maximise the demand's worth, sum_i weight_i y_i, with every pattern (how many
  // of each size one GPU holds) worth at most one GPU. Start from the patterns of one size each.
  std::vector<std::vector<double>> rows;
  for (size_t i = 0; i < n; ++i) {
    std::vector<double> row(n, 0.0);
    row[i] = kCap / size[i];
    rows.push_back(std::move(row));
  }
  std::vector<double> y(n, 0.0), best(kCap + 1, 0.0);
  std::vector<int> last(kCap + 1, -1);
  // best[f]: the most the prices y give any multiset of sizes fitting in f; last[f]: the size
  // taken last on the way (-1: f - 1's multiset, nothing new).
  auto knapsack = [&] {
    for (int f = 0; f <= kCap; ++f) {
      best[f] = f > 0 ? best[f - 1] : 0;
      last[f] = -1;
      for (size_t i = 0; i < n; ++i) {
        if (size[i] <= f && best[f - size[i]] + y[i] > best[f] + kEps) {
          best[f] = best[f - size[i]] + y[i];
          last[f] = static_cast<int>(i);
        }
      }
    }
  };
  for (int round = 0; round < kMaxRounds; ++round) {
    y = MaximizeUnderUnitRows(weight, rows);
    knapsack();
    if (best[kCap] <= 1 + kTolerance) break;
    // The prices overrate this pattern: add it as a constraint and solve again.
    std::vector<double> row(n, 0.0);
    for (int f = kCap; f > 0;) {
      if (last[f] < 0) {
        --f;
        continue;
      }
      row[last[f]] += 1;
      f -= size[last[f]];
    }
    rows.push_back(std::move(row));
  }
  knapsack();
  out.empty_ = false;
  out.patterns_ = rows.size();
  for (size_t i = 0; i < n; ++i) {
    out.worth_[size[i]] = y[i] * kCap;
    out.gpus_per_weight_ += weight[i] * y[i];
  }
  for (int f = 0; f <= kCap; ++f) out.packed_[f] = best[f] * kCap;
  return out;
}

double PackingPrices::Worth(int32_t milli) const {
  return milli >= 0 && milli <= kCap ? worth_[milli] : 0;
}

double PackingPrices::Packed(int32_t free_milli) const {
  return packed_[std::clamp(free_milli, 0, kCap)];
}

double PackingPrices::Regret(int32_t free_milli, int32_t milli) const {
  if (empty_ || milli <= 0 || milli > free_milli) return 0;
  return std::max(0.0, Packed(free_milli) - Worth(milli) - Packed(free_milli - milli));
}

}  // namespace hangar::sched::placement
