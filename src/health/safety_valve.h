// SafetyValve: a fleet-level circuit breaker on automatic drains (NVSentinel's). A bad rule, a
// driver bug or a fabric-wide blip must not empty the cluster: once `percent` of the nodes (and
// at least `min_cordons`) have been cordoned within `window`, the valve trips and no further node
// is drained by a rule until an operator has looked and reset it. Drains already under way
// continue; nodes already cordoned may lose more GPUs; operator cordons and lost nodes are never
// held back (nor counted).
#pragma once

#include <cstdint>
#include <deque>
#include <string>
#include <string_view>

#include "common/time.h"

namespace hangar::health {

struct SafetyValveOptions {
  int percent = 50;  // of the fleet's nodes
  Duration window = 5 * kMinute;
  // On a small cluster one or two real faults are half the fleet; they must still drain.
  int min_cordons = 3;
};

class SafetyValve {
 public:
  SafetyValve(SafetyValveOptions options, int total_nodes);

  // Asks to drain `node` (a rule's verdict) at `now`. True when allowed: the node was already
  // cordoned within the window, or the valve has not tripped. An allowed node is counted, and the
  // valve trips when the count reaches the limit.
  bool Admit(uint32_t node, Time now);
  // An operator looked: close the valve and start counting afresh.
  void Reset();

  bool tripped() const { return tripped_; }
  Time tripped_at() const { return tripped_at_; }
  // Distinct nodes cordoned by rules within the window ending at `now`.
  int RecentCordons(Time now) const;
  // "safety valve: 5 of 10 nodes cordoned within 5m (limit 50%); not draining node-7 ..."
  std::string HeldReason(std::string_view node_name, Time now) const;

 private:
  void Prune(Time now);

  SafetyValveOptions options_;
  int total_nodes_;
  bool tripped_ = false;
  Time tripped_at_ = -1;
  int count_at_trip_ = 0;
  std::deque<std::pair<Time, uint32_t>> cordons_;  // (when, node), oldest first, unique nodes
};

}  // namespace hangar::health
