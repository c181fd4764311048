// CounterTrack: one cumulative hardware counter (PCIe replays, IB symbol errors, ...) turned into
// increases and rates over trailing windows.
//
// Hardware counters reset (driver reload, reboot, someone clears them) and saturate rather than
// wrap. The track keeps its own monotone total: the first reading is only a baseline (so a
// controller that starts, or meets a node for the first time, never mistakes years of history for
// a burst); a reading lower than the one before means the counter restarted from zero, so the new
// reading itself is the increase since the reset. An agent restart changes nothing: the hardware
// counter carries on and so does the total.
//
// History is thinned to about 60 points per retention period, keeping the two newest readings
// exact, and a run of readings with no increase keeps only its first and newest point: a counter
// that stays quiet (most of them) holds two points, not one per heartbeat.
#pragma once

#include <absl/container/inlined_vector.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "common/time.h"

namespace hangar::health {

class CounterTrack {
 public:
  // `retention`: the longest window anyone will ask about.
  explicit CounterTrack(Duration retention);

  // Adds a reading taken at t. Returns false (and changes nothing) for a reading older than the
  // newest one, e.g. a late message from before an agent restart.
  bool Add(Time t, uint64_t reading);

  bool empty() const { return points_.empty(); }
  uint64_t reading() const { return last_reading_; }
  // Increase at the newest reading (0 for the baseline).
  uint64_t last_increase() const { return last_increase_; }
  int resets() const { return resets_; }
  size_t points() const { return points_.size(); }  // history kept

  // Events in the trailing `window` that ends at the newest reading. When the readings around
  // the window's start are further apart than the window, the count is scaled down to the
  // window's length; with less history than the window it is the raw count (never scaled up, so
  // one reading after a quiet spell cannot look like a burst).
  double InWindow(Duration window) const;

 private:
  struct Point {
    Time t;
    uint64_t total;
  };
  void Prune();
  Duration granularity() const { return std::max<Duration>(retention_ / 60, 1); }

  Duration retention_;
  // Few points are kept (one per granularity step within the retention), so dropping from the
  // front is cheap. A quiet counter (most of them) keeps two, held inline: there are 4 of these
  // per GPU, and a heap block each cost ~50 bytes more (an empty deque cost ~600).
  absl::InlinedVector<Point, 2> points_;
  uint64_t total_ = 0;
  uint64_t last_reading_ = 0;
  uint64_t last_increase_ = 0;
  int resets_ = 0;
};

}  // namespace hangar::health
