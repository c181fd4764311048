#include "controller/state/chunk_plan.h"

#include <algorithm>

namespace hangar::controller {

std::vector<int32_t> PlanChunkSources(int64_t chunks, int holders, int roots, int position,
                                      int fanout) {
  const int k = std::max(1, holders > 0 ? holders : roots);
  const int f = std::max(1, fanout);
  std::vector<int32_t> out(static_cast<size_t>(std::max<int64_t>(0, chunks)), -1);
  for (int64_t c = 0; c < chunks; ++c) {
    const int r = static_cast<int>(c % k);  // this chunk's root
    // The member order for this chunk: its root first, then everyone else as they joined.
    const int p = position == r ? 0 : position < r ? position + 1 : position;
    if (p == 0) continue;       // the root: the origin (a holder never stages)
    const int q = (p - 1) / f;  // the parent's place in that order
    out[c] = q == 0 ? r : (q - 1 < r ? q - 1 : q);
  }
  return out;
}

}  // namespace hangar::controller
