// Fair share's memory of what each queue used (Snapshot::queue_history), kept alike by the
// controller and the simulator: per queue-tree node and resource dimension, an exponential
// average of what the queue held, with a half-life.
#pragma once

#include <cmath>
#include <cstdint>
#include <vector>

#include "common/time.h"

namespace hangar::sched::owner {

// After `dt` during which each node held `usage`, moves `history` toward it: what is remembered
// halves every `half_life` (<= 0: only the usage of the moment is remembered).
inline void DecayShareHistory(std::vector<std::vector<double>>& history,
                              const std::vector<std::vector<int64_t>>& usage, Duration dt,
                              Duration half_life) {
  const double keep =
      half_life > 0 ? std::exp2(-static_cast<double>(dt) / static_cast<double>(half_life)) : 0.0;
  for (size_t x = 0; x < history.size() && x < usage.size(); ++x) {
    for (size_t d = 0; d < history[x].size() && d < usage[x].size(); ++d) {
      history[x][d] = history[x][d] * keep + static_cast<double>(usage[x][d]) * (1 - keep);
    }
  }
}

}  // namespace hangar::sched::owner
