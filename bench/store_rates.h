// What bounds a store's commits, measured on the store alone (bench/fleet_scale --store).
#pragma once

#include <string>

#include "common/status.h"

namespace hangar::bench {

struct StoreRates {
  double one_row_commits_per_s = 0;  // durable commits of a one-job batch, back to back
  double batch_1000_ms = 0;          // one commit of 1,000 new job rows (a cycle's placements)
};

// Commits into the empty store at `url` (a fresh SQLite file or database) for about 3 s.
StatusOr<StoreRates> MeasureStoreRates(const std::string& url);

}  // namespace hangar::bench
