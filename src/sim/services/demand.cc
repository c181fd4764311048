#include "sim/services/demand.h"

#include <algorithm>
#include <cmath>
#include <numbers>

namespace hangar::sim {

DemandCurve DemandCurve::Sine(double trough_rps, double peak_rps, Duration peak_at) {
  DemandCurve c;
  c.trough_ = trough_rps;
  c.peak_ = peak_rps;
  c.peak_at_ = peak_at;
  return c;
}

DemandCurve DemandCurve::Hourly(std::vector<double> rps) {
  DemandCurve c;
  c.sine_ = false;
  c.hourly_ = std::move(rps);
  return c;
}

namespace {

Duration TimeOfDay(Time t) { return ((t % kDay) + kDay) % kDay; }

}  // namespace

double DemandCurve::RpsAt(Time t) const {
  const Duration day_ms = TimeOfDay(t);
  if (!sine_) {
    if (hourly_.empty()) return 0;
    return hourly_[static_cast<size_t>(day_ms / kHour) % hourly_.size()];
  }
  const double phase = 2 * std::numbers::pi * static_cast<double>(day_ms - peak_at_) / kDay;
  return trough_ + (peak_ - trough_) * (1 + std::cos(phase)) / 2;
}

double DemandCurve::Peak() const {
  if (sine_) return peak_;
  return hourly_.empty() ? 0 : *std::max_element(hourly_.begin(), hourly_.end());
}

}  // namespace hangar::sim
