// FleetHearing: whether the controller hears its fleet, and so whether it may believe that silent
// nodes are gone. It measures how late heartbeats arrive (IngestLag: a controller that falls
// behind grants silent nodes that much more time), and it decides when to hold node losses: a
// controller that hears (almost) no heartbeats, not even from the nodes that are not overdue, is
// itself in trouble (its threads stalled, its network cut) and cannot tell dead nodes from live
// ones, so it holds every loss until heartbeats flow again, as Kubernetes does in a full
// disruption, for at most a bounded time (then a fleet that really went dark is lost). When the
// nodes still up keep beating, the silent ones really are gone, however many they are.
//
// Not thread-safe: the state thread owns it (ClusterState holds it).
#pragma once

#include <cstdint>
#include <string>

#include "common/time.h"
#include "controller/state/ingest_lag.h"

namespace hangar::controller {

class FleetHearing {
 public:
  // A heartbeat a node sent at `sent` (its clock) was taken in at `received`.
  void Observe(IngestLag::NodeClock* node, Time sent, Time received) {
    lag_.Observe(node, sent, received);
  }

  // One check of the nodes' heartbeats at `now`: `overdue` registered nodes are silent past the
  // timeout while `beating` are on time, each sending one heartbeat per `interval`.
  struct Check {
    bool hold = false;  // hold the losses of the overdue nodes
    std::string event;  // a controller event to record ("" none)
  };
  Check Judge(int64_t overdue, int64_t beating, Duration interval, Duration max_hold, Time now);
  // Reads the lag (IngestLag) for this check; last_lag() keeps it until the next.
  IngestLag::Reading ReadLag(Time now);
  Duration last_lag() const { return last_lag_; }

  void CountLoss() { ++nodes_lost_total_; }

  // After a restore: every node has the reconnect grace to come back, counted from `now` (when the
  // controller listens again).
  void OpenReconnectGrace(Time now) { restored_at_ = now; }
  // When the reconnect grace opened (-1: the controller did not restore).
  Time restored_at() const { return restored_at_; }
  // Whether `now` is within `grace` of the restore.
  bool Reconnecting(Time now, Duration grace) const {
    return restored_at_ >= 0 && now - restored_at_ <= grace;
  }
  int64_t nodes_lost_total() const { return nodes_lost_total_; }

 private:
  IngestLag lag_;
  IngestLag::Reading reading_;  // the last ReadLag
  Duration last_lag_ = 0;
  bool holding_ = false;  // losses are held: the controller hears no heartbeats
  Time hold_since_ = -1;
  int64_t nodes_lost_total_ = 0;
  Time restored_at_ = -1;
};

}  // namespace hangar::controller
