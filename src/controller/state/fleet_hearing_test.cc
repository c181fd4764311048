#include "controller/state/fleet_hearing.h"

#include <gtest/gtest.h>

namespace hangar::controller {
namespace {

constexpr Duration kInterval = kSecond;
constexpr Duration kMaxHold = 30 * kSecond;

TEST(FleetHearingTest, SilentNodesAreLostWhileTheRestAreHeard) {
  FleetHearing h;
  IngestLag::NodeClock clock;
  for (int i = 0; i < 3; ++i) h.Observe(&clock, 0, 10'000 + i * 100);  // 3 nodes beating
  h.ReadLag(10'500);
  const FleetHearing::Check c = h.Judge(/*overdue=*/2, /*beating=*/3, kInterval, kMaxHold, 10'500);
  EXPECT_FALSE(c.hold);
  EXPECT_EQ(c.event, "");
  h.CountLoss();
  h.CountLoss();
  EXPECT_EQ(h.nodes_lost_total(), 2);
}

TEST(FleetHearingTest, AControllerThatHearsNothingHoldsLossesForABoundedTime) {
  FleetHearing h;
  h.ReadLag(1000);
  FleetHearing::Check c = h.Judge(4, 0, kInterval, kMaxHold, 1000);
  EXPECT_TRUE(c.hold);
  EXPECT_EQ(c.event,
            "no node's heartbeat arrived in time (all 4 are overdue): the controller is not "
            "hearing the fleet, and may be the one in trouble; holding 4 node losses for up to "
            "30s");
  c = h.Judge(4, 0, kInterval, kMaxHold, 20'000);  // still holding, said once
  EXPECT_TRUE(c.hold);
  EXPECT_EQ(c.event, "");
  c = h.Judge(4, 0, kInterval, kMaxHold, 31'000);
  EXPECT_FALSE(c.hold);
  EXPECT_EQ(c.event, "no heartbeats for 30s: losing the 4 overdue nodes");
  c = h.Judge(4, 0, kInterval, kMaxHold, 32'000);  // no new hold until heartbeats flow again
  EXPECT_FALSE(c.hold);
  EXPECT_EQ(c.event, "");
}

TEST(FleetHearingTest, FewHeartbeatsFromTheNodesOnTimeHoldAndTheirReturnResumesLosses) {
  FleetHearing h;
  h.ReadLag(1000);
  FleetHearing::Check c = h.Judge(2, 10, kInterval, kMaxHold, 1000);
  EXPECT_TRUE(c.hold);
  EXPECT_EQ(c.event,
            "0 heartbeats arrived in the last second, where the 10 nodes still on time send about "
            "10: the controller is not hearing the fleet, and may be the one in trouble; holding 2 "
            "node losses for up to 30s");
  IngestLag::NodeClock clock;
  for (int i = 0; i < 6; ++i) h.Observe(&clock, 0, 2000 + i * 10);
  h.ReadLag(2100);
  c = h.Judge(2, 10, kInterval, kMaxHold, 2100);
  EXPECT_FALSE(c.hold);
  EXPECT_EQ(c.event, "heartbeats arrive again: node losses resume");
}

// After a restore every node has the reconnect grace, counted from when the controller listens.
TEST(FleetHearingTest, TheReconnectGraceOpensAtTheRestore) {
  FleetHearing h;
  EXPECT_EQ(h.restored_at(), -1);
  EXPECT_FALSE(h.Reconnecting(0, 10 * kSecond)) << "no restore, no grace";
  h.OpenReconnectGrace(5 * kSecond);
  EXPECT_TRUE(h.Reconnecting(15 * kSecond, 10 * kSecond));
  EXPECT_FALSE(h.Reconnecting(15 * kSecond + 1, 10 * kSecond));
  EXPECT_EQ(h.restored_at(), 5 * kSecond);
}

}  // namespace
}  // namespace hangar::controller
