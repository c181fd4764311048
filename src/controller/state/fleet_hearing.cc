#include "controller/state/fleet_hearing.h"

#include <algorithm>

namespace hangar::controller {

IngestLag::Reading FleetHearing::ReadLag(Time now) {
  reading_ = lag_.Read(now);
  last_lag_ = reading_.lag;
  return reading_;
}

FleetHearing::Check FleetHearing::Judge(int64_t overdue, int64_t beating, Duration interval,
                                        Duration max_hold, Time now) {
  Check c;
  const int64_t expected = beating * kSecond / std::max<Duration>(interval, 1);
  const bool hearing = reading_.samples >= std::max<int64_t>(1, expected / 2);
  if (overdue == 0 || hearing) {
    if (holding_) c.event = "heartbeats arrive again: node losses resume";
    holding_ = false;
    hold_since_ = -1;
  } else if (hold_since_ < 0) {
    hold_since_ = now;
    holding_ = true;
    // Said in words that fit the case: with every node overdue there is no rate to fall short of.
    const std::string heard =
        beating == 0
            ? "no node's heartbeat arrived in time (all " + std::to_string(overdue) +
                  " are overdue)"
            : std::to_string(reading_.samples) +
                  " heartbeats arrived in the last second, where the " + std::to_string(beating) +
                  " nodes still on time send about " + std::to_string(expected);
    c.event = heard +
              ": the controller is not hearing the fleet, and may be the one in trouble; holding " +
              std::to_string(overdue) + " node losses for up to " + FormatDuration(max_hold);
  } else if (holding_ && now - hold_since_ >= max_hold) {
    holding_ = false;  // until heartbeats flow again, no new hold
    c.event = "no heartbeats for " + FormatDuration(now - hold_since_) + ": losing the " +
              std::to_string(overdue) + " overdue nodes";
  }
  c.hold = holding_;
  return c;
}

}  // namespace hangar::controller
