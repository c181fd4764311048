#include "health/counter_track.h"

#include <algorithm>

namespace hangar::health {

CounterTrack::CounterTrack(Duration retention) : retention_(std::max<Duration>(retention, 1)) {}

bool CounterTrack::Add(Time t, uint64_t reading) {
  if (points_.empty()) {
    last_reading_ = reading;
    last_increase_ = 0;
    points_.push_back({t, total_});
    return true;
  }
  if (t < points_.back().t) return false;
  if (reading >= last_reading_) {
    last_increase_ = reading - last_reading_;
  } else {
    last_increase_ = reading;  // restarted from zero since the last reading
    ++resets_;
  }
  last_reading_ = reading;
  total_ += last_increase_;
  if (t == points_.back().t) {
    points_.back().total = total_;
    return true;
  }
  size_t n = points_.size();
  // A quiet counter (most of them, most of the time) keeps two points however long it stays
  // quiet: where the quiet run began and its newest reading. Nothing happened between them, so
  // the total at any time in the run is known exactly (InWindow).
  if (n >= 2 && points_[n - 1].total == total_ && points_[n - 2].total == total_) {
    points_.back().t = t;
    Prune();
    return true;
  }
  // Thin: drop the second-newest point when it sits too close to the one before it. The newest
  // two readings stay exact for short windows; older points end up >= granularity apart.
  // When the second-newest point opens the quiet run that the newest closes, it stays (the
  // run's exactness depends on it) and the point before it is the one thinned.
  const size_t victim = n >= 2 && points_[n - 2].total == points_[n - 1].total ? n - 3 : n - 2;
  if (n >= 3 && victim >= 1 && victim < n &&
      points_[victim].t - points_[victim - 1].t < granularity()) {
    points_.erase(points_.begin() + static_cast<std::ptrdiff_t>(victim));
  }
  points_.push_back({t, total_});
  Prune();
  return true;
}

void CounterTrack::Prune() {
  // Keep the newest point at or before (now - retention): it is the base of the longest window.
  Time horizon = points_.back().t - retention_;
  size_t drop = 0;
  while (points_.size() - drop >= 2 && points_[drop + 1].t <= horizon) ++drop;
  if (drop) points_.erase(points_.begin(), points_.begin() + static_cast<std::ptrdiff_t>(drop));
}

double CounterTrack::InWindow(Duration window) const {
  if (points_.size() < 2 || window <= 0) return 0;
  const Point& now = points_.back();
  Time start = now.t - window;
  // The newest point at or before the window's start; the oldest point when history is shorter.
  auto it = std::upper_bound(points_.begin(), points_.end(), start,
                             [](Time s, const Point& p) { return s < p.t; });
  const Point& base = it == points_.begin() ? points_.front() : *(it - 1);
  // The window starts inside a quiet run: the total at its start is exactly the run's.
  if (it != points_.begin() && it != points_.end() && it->total == base.total) {
    return static_cast<double>(now.total - base.total);
  }
  Duration span = now.t - base.t;
  double count = static_cast<double>(now.total - base.total);
  if (span <= 0) return 0;
  if (span > window) count = count * static_cast<double>(window) / static_cast<double>(span);
  return count;
}

}  // namespace hangar::health
