// A serving fleet's request rate over the day (docs/sim-services.md): a sine between a trough and
// a peak, or 24 hourly rates. The curve repeats every day; the time of day is the simulation's
// time modulo 24 hours (for a replayed trace, UTC of the trace's dates).
#pragma once

#include <vector>

#include "common/time.h"

namespace hangar::sim {

class DemandCurve {
 public:
  // trough + (peak - trough) * (1 + cos(2 pi (t - peak_at) / 24 h)) / 2: the peak at `peak_at`
  // after midnight, the trough twelve hours away from it. Rates must be 0 <= trough <= peak.
  static DemandCurve Sine(double trough_rps, double peak_rps, Duration peak_at);
  // 24 rates, the first from 00:00 to 01:00; each held for its whole hour.
  static DemandCurve Hourly(std::vector<double> rps);

  // Requests per second at time t.
  double RpsAt(Time t) const;
  // The highest rate of the day.
  double Peak() const;

 private:
  bool sine_ = true;
  double trough_ = 0, peak_ = 0;
  Duration peak_at_ = 0;
  std::vector<double> hourly_;
};

}  // namespace hangar::sim
