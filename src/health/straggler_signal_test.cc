// A straggler named from a gang's progress reports is a health signal on its node: suspect while
// the rank stays slow and for straggler_quiet after, degraded when it keeps coming back.
#include <gtest/gtest.h>

#include "health/health_engine.h"
#include "health/health_test_fleet.h"

namespace hangar::health {
namespace {

using namespace ::hangar::health::testing;

using ::hangar::cluster::NodeCondition;

StragglerSignal Slow(Time at) {
  return {at, "rank 1 of job 7 takes 0.400 s a step, against its gang's median 0.100 s"};
}

TEST(StragglerSignalTest, MakesTheNodeSuspectUntilItHasBeenQuietForAnHour) {
  HealthEngine e(Fleet(2), InPool(), 0);
  ASSERT_TRUE(e.ObserveStraggler(1, Slow(1000)).ok());
  Evaluation ev = e.Evaluate(1000);
  EXPECT_EQ(e.node_state(1), HealthState::kSuspect);
  EXPECT_EQ(e.node_state(0), HealthState::kHealthy);
  ASSERT_EQ(ev.transitions.size(), 1u);
  EXPECT_EQ(ev.transitions[0].ToString("node-1"),
            "node-1: healthy -> suspect: straggler: rank 1 of job 7 takes 0.400 s a step, against "
            "its gang's median 0.100 s");
  // Still schedulable, ranked after clean nodes; its GPUs stay available.
  EXPECT_EQ(e.node_condition(1), (NodeCondition{true, true, 1, 0}));
  const NodeReport r = e.Report(1);
  ASSERT_EQ(r.conditions.size(), 1u);
  EXPECT_EQ(r.conditions[0].type, "straggler");
  EXPECT_EQ(r.conditions[0].action, RecommendedAction::kWatch);
  // Reported slow again at 30 minutes: the hour counts from then.
  ASSERT_TRUE(e.ObserveStraggler(1, Slow(30 * kMinute)).ok());
  e.Evaluate(30 * kMinute + kHour - 1);
  EXPECT_EQ(e.node_state(1), HealthState::kSuspect);
  e.Evaluate(30 * kMinute + kHour + kSecond);
  EXPECT_EQ(e.node_state(1), HealthState::kHealthy);
  EXPECT_EQ(e.node_condition(1), NodeCondition{});
  EXPECT_EQ(e.ObserveStraggler(2, Slow(0)).code(), StatusCode::kInvalidArgument);
}

TEST(StragglerSignalTest, AStragglerThatKeepsComingBackDegradesItsNode) {
  HealthEngine e(Fleet(2), InPool(), 0);
  Time t = 0;
  for (int opening = 0; opening < 3; ++opening) {
    ASSERT_TRUE(e.ObserveStraggler(0, Slow(t)).ok());
    e.Evaluate(t);
    t += kHour + 2 * kSecond;
    e.Evaluate(t);  // quiet for an hour: closed
  }
  ASSERT_TRUE(e.ObserveStraggler(0, Slow(t)).ok());
  e.Evaluate(t);
  EXPECT_EQ(e.node_state(0), HealthState::kDegraded);
  EXPECT_FALSE(e.node_condition(0).gangs_allowed);
}

}  // namespace
}  // namespace hangar::health
