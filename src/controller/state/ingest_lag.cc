#include "controller/state/ingest_lag.h"

#include <algorithm>

namespace hangar::controller {

Duration IngestLag::Edge(int bucket) { return bucket == 0 ? 0 : Duration{10} << (bucket - 1); }

void IngestLag::Observe(NodeClock* node, Time sent, Time received) {
  Duration late = 0;  // an agent that sends no time (sent <= 0) counts as on time
  if (sent > 0) {
    const int64_t delta = received - sent;
    node->min_delta = std::min(node->min_delta, delta);
    late = delta - node->min_delta;
  }
  int b = 0;
  while (b + 1 < kBuckets && late >= Edge(b + 1)) ++b;
  const int64_t index = received / kSlot;
  Slot& s = slots_[static_cast<size_t>(index % kSlots)];
  if (s.index != index) {
    s.index = index;
    s.count.fill(0);
  }
  s.count[static_cast<size_t>(b)]++;
}

IngestLag::Reading IngestLag::Read(Time now) const {
  std::array<int64_t, kBuckets> sum{};
  int64_t total = 0;
  const int64_t newest = now / kSlot;
  for (const Slot& s : slots_) {
    if (s.index < 0 || s.index > newest || s.index < newest - (kSlots - 1)) continue;
    for (int b = 0; b < kBuckets; ++b)
      sum[static_cast<size_t>(b)] += s.count[static_cast<size_t>(b)];
  }
  for (int64_t c : sum) total += c;
  if (total < 10) return {0, total};
  // The p90 sample's bucket; its upper edge, so that the grant errs on the side of waiting.
  int64_t seen = 0;
  for (int b = 0; b < kBuckets; ++b) {
    seen += sum[static_cast<size_t>(b)];
    if (seen * 10 >= total * 9) return {b + 1 < kBuckets ? Edge(b + 1) : Edge(b) * 2, total};
  }
  return {0, total};
}

}  // namespace hangar::controller
