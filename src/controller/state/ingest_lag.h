// IngestLag: how late heartbeats are reaching the controller right now.
//
// A node is lost when it has been silent for the heartbeat timeout. Silence is measured on the
// controller's clock, by when its heartbeats were taken in; when the controller itself falls
// behind (its cores are saturated, or a burst of work holds its threads) every heartbeat arrives
// late, and a timeout that ignores that declares live nodes lost and requeues their jobs. So the
// controller measures the lateness of the heartbeats that do arrive and grants silent nodes that
// much more time.
//
// Lateness without synchronised clocks: each heartbeat carries the agent's send time. For a node,
// `received - sent` is its clock offset plus the delay; the smallest value seen from that node is
// taken as offset plus the shortest delay, and lateness is how far a heartbeat exceeds it. The
// lag is a high quantile (p90) of the lateness of the heartbeats received over the last second,
// so a few agents with jumping clocks cannot stretch it, while a controller that is behind for
// most of its nodes shows at once. Nodes that are really silent send nothing and so do not
// contribute. Not thread-safe (the state owner's thread).
#pragma once

#include <array>
#include <cstdint>

#include "common/time.h"

namespace hangar::controller {

class IngestLag {
 public:
  // Per node: the smallest `received - sent` seen so far (INT64_MAX: none yet).
  struct NodeClock {
    int64_t min_delta = INT64_MAX;
  };

  // A heartbeat sent at `sent` (the agent's clock; <= 0: not given, counted as on time) was
  // received at `received` (ours).
  void Observe(NodeClock* node, Time sent, Time received);
  struct Reading {
    Duration lag = 0;     // p90 lateness over the last 1-1.25 s; 0 with fewer than 10 heartbeats
    int64_t samples = 0;  // heartbeats received in that time
  };
  Reading Read(Time now) const;

 private:
  // Lateness histogram per 250 ms slot, the current one and the four before it (one to 1.25 s of
  // history): bucket b holds lateness in
  // [Edge(b), Edge(b + 1)) ms, 0, 10 ms, then doubling up to ~80 s.
  static constexpr int kBuckets = 15;
  static constexpr int kSlots = 5;
  static constexpr Duration kSlot = 250;
  static Duration Edge(int bucket);
  struct Slot {
    int64_t index = -1;  // received / kSlot of its samples; -1: empty
    std::array<int32_t, kBuckets> count{};
  };
  std::array<Slot, kSlots> slots_;
};

}  // namespace hangar::controller
