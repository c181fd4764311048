#include "sched/windows.h"

#include <gtest/gtest.h>

#include "sched/test_util.h"

namespace hangar::sched {
namespace {

using namespace sched::testing;

NodeWindow Window(std::string name, Time start, Time end, std::vector<uint32_t> nodes) {
  NodeWindow w;
  w.name = std::move(name);
  w.start = start;
  w.end = end;
  w.nodes = std::move(nodes);
  return w;
}

PendingJob Job(Duration limit, int32_t window = -1) {
  PendingJob p;
  p.time_limit = limit;
  p.window = window;
  return p;
}

TEST(WindowGateTest, AJobIsKeptOffTheWindowsItsTimeLimitWouldCross) {
  const std::vector<NodeWindow> w = {Window("late", 5000, 6000, {2}),
                                     Window("soon", 1000, 2000, {0})};
  WindowGate gate(w, 4, 0);
  // Ends before either opens: no node is closed to it.
  EXPECT_FALSE(gate.Applies(gate.KeyOf(Job(1000))));
  EXPECT_EQ(gate.Mask(gate.KeyOf(Job(1000)), nullptr), nullptr);
  // Crosses "soon" only.
  const std::vector<uint8_t>* m = gate.Mask(gate.KeyOf(Job(1001)), nullptr);
  ASSERT_NE(m, nullptr);
  EXPECT_EQ(*m, (std::vector<uint8_t>{1, 0, 0, 0}));
  // No time limit: runs for ever, so it crosses both.
  EXPECT_EQ(*gate.Mask(gate.KeyOf(Job(0)), nullptr), (std::vector<uint8_t>{1, 0, 1, 0}));
  // Joined with EASY's reserved nodes.
  const std::vector<uint8_t> reserved = {0, 0, 0, 1};
  EXPECT_EQ(*gate.Mask(gate.KeyOf(Job(0)), &reserved), (std::vector<uint8_t>{1, 0, 1, 1}));
  EXPECT_EQ(gate.Mask(gate.KeyOf(Job(10)), &reserved), &reserved);
}

TEST(WindowGateTest, AJobInsideAWindowMayUseItsNodesOnlyWhileItIsOpen) {
  const std::vector<NodeWindow> w = {Window("r", 1000, 2000, {1, 2})};
  WindowGate before(w, 4, 999);
  auto closed = before.NotOpen(Job(0, 0));
  ASSERT_TRUE(closed.has_value());
  EXPECT_EQ(closed->rule, Rule::kNotNowWindowClosed);
  EXPECT_EQ(before.Detail(*closed),
            "runs inside reservation r, which opens at " + FormatUtcTimestamp(1000));
  WindowGate open(w, 4, 1000);
  EXPECT_FALSE(open.NotOpen(Job(0, 0)).has_value());
  EXPECT_EQ(*open.Mask(open.KeyOf(Job(0, 0)), nullptr), (std::vector<uint8_t>{1, 0, 0, 1}));
  // Everyone else is kept off its nodes while it is open, whatever their time limit.
  EXPECT_EQ(*open.Mask(open.KeyOf(Job(1)), nullptr), (std::vector<uint8_t>{0, 1, 1, 0}));
  WindowGate ended(w, 4, 2000);
  EXPECT_TRUE(ended.NotOpen(Job(0, 0)).has_value());
  EXPECT_FALSE(ended.Applies(ended.KeyOf(Job(0))));
}

// Two nodes; a reservation holds node 0 from t=1000 to 2000.
class ReservationCycleTest : public ::testing::Test {
 protected:
  ReservationCycleTest() : t_(Leaves(1, 2)), c_(t_) {
    c_.windows = {Window("r1", 1000, 2000, {0})};
  }
  const Verdict* WaitingOf(const Decisions& d, JobId id) {
    for (const auto& v : d.waiting) {
      if (v.job == id) return &v;
    }
    return nullptr;
  }
  std::shared_ptr<const cluster::Topology> t_;
  MiniCluster c_;
};

TEST_F(ReservationCycleTest, AReservationKeepsOthersOutAndLetsItsJobsIn) {
  const JobId other = c_.Submit(Whole(*t_, 1, 8), 1000, 500, 500);
  const JobId second = c_.Submit(Whole(*t_, 1, 8), 1000, 500, 500);
  const JobId inside = c_.Submit(Whole(*t_, 1, 8), 1000, 500, 500);
  c_.RunInside(inside, 0);
  Decisions d = c_.Step(1000);
  ASSERT_TRUE(c_.IsRunning(other));
  EXPECT_EQ(c_.AssignmentOf(other).tasks[0].node, 1u);  // not the reserved node
  ASSERT_TRUE(c_.IsRunning(inside));
  EXPECT_EQ(c_.AssignmentOf(inside).tasks[0].node, 0u);
  const Verdict* v = WaitingOf(d, second);
  ASSERT_NE(v, nullptr);
  EXPECT_EQ(v->reason.rule, Rule::kNotNowWindow);
  EXPECT_EQ(v->detail, "fits only on nodes held by reservation r1 (" + FormatUtcTimestamp(1000) +
                           " to " + FormatUtcTimestamp(2000) + ")");
  // Node 1 frees at 1500: `second` takes it; a job without a time limit waits for the window's end.
  const JobId forever = c_.Submit(Whole(*t_, 1, 8), 1400, 5000);
  c_.Step(1500);
  EXPECT_EQ(c_.StartOf(second), 1500);
  EXPECT_FALSE(c_.IsRunning(forever));
  c_.Step(2000);
  EXPECT_EQ(c_.StartOf(forever), 2000);
}

TEST_F(ReservationCycleTest, AJobInsideAReservationWaitsForItToOpen) {
  const JobId inside = c_.Submit(Whole(*t_, 1, 8), 0, 100, 100);
  c_.RunInside(inside, 0);
  Decisions d = c_.Step(10);
  const Verdict* v = WaitingOf(d, inside);
  ASSERT_NE(v, nullptr);
  EXPECT_EQ(v->reason.rule, Rule::kNotNowWindowClosed);
  EXPECT_TRUE(d.reservations.empty());  // it holds nobody up meanwhile
  c_.Step(1000);
  EXPECT_TRUE(c_.IsRunning(inside));
}

TEST_F(ReservationCycleTest, NoJobStartsOnTheNodesIfItsTimeLimitWouldCrossTheWindow) {
  // In order, nothing blocked: a job that ends before the window may use its node, one whose
  // limit crosses the start may not, and neither may one without a time limit.
  const JobId crosses = c_.Submit(Whole(*t_, 1, 8), 0, 900, 1500);
  const JobId forever = c_.Submit(Whole(*t_, 1, 8), 0, 900);
  const JobId fits = c_.Submit(Whole(*t_, 1, 8), 0, 900, 900);
  Decisions d = c_.Step(0);
  EXPECT_TRUE(c_.IsRunning(fits));
  EXPECT_TRUE(c_.IsRunning(crosses));  // on node 1
  EXPECT_EQ(c_.AssignmentOf(crosses).tasks[0].node, 1u);
  EXPECT_EQ(c_.AssignmentOf(fits).tasks[0].node, 0u);
  const Verdict* v = WaitingOf(d, forever);
  ASSERT_NE(v, nullptr);
  EXPECT_EQ(v->reason.rule, Rule::kNotNowWindow);
  EXPECT_NE(v->detail.find("reservation r1"), std::string::npos) << v->detail;
  EXPECT_NE(v->detail.find("would cross the window's start"), std::string::npos) << v->detail;
}

TEST(ReservationBackfillTest, BackfillRefusesAJobWhoseTimeLimitCrossesAWindowAndSaysWhy) {
  auto t = Leaves(1, 3);
  MiniCluster c(t);
  c.windows = {Window("maint", 1000, 2000, {2})};
  const JobId busy = c.Submit(Whole(*t, 1, 8), 0, 300, 300);  // node 0 until 300
  c.Step(0);
  ASSERT_EQ(c.AssignmentOf(busy).tasks[0].node, 0u);
  // A gang of two whole nodes with a long limit may not use node 2 (it would cross the window):
  // it waits for node 0 and reserves nodes 0 and 1 from t=300.
  const JobId gang = c.Submit(Whole(*t, 2, 8), 1, 2000, 2000);
  // Backfill candidates: one crossing the window (and ending after 300), one short enough for both.
  const JobId crossing = c.Submit(Whole(*t, 1, 8), 2, 1500, 1500);
  const JobId shorty = c.Submit(Whole(*t, 1, 8), 3, 200, 200);
  Decisions d = c.Step(5);
  ASSERT_EQ(d.reservations.size(), 1u);
  EXPECT_EQ(d.reservations[0].job, gang);
  EXPECT_EQ(d.reservations[0].nodes, (std::vector<uint32_t>{0, 1}));
  ASSERT_TRUE(c.IsRunning(shorty));
  Placement placed;
  for (const auto& p : d.placements) {
    if (p.job == shorty) placed = p;
  }
  EXPECT_TRUE(placed.backfilled);
  EXPECT_FALSE(c.IsRunning(crossing));
  const Verdict* v = nullptr;
  for (const auto& w : d.waiting) {
    if (w.job == crossing) v = &w;
  }
  ASSERT_NE(v, nullptr);
  EXPECT_EQ(v->reason.rule, Rule::kNotNowWindow);
  EXPECT_NE(v->detail.find("reservation maint"), std::string::npos) << v->detail;
}

TEST(ReservationPreemptionTest, APreemptorIsKeptOffAWindowItWouldCross) {
  auto t = Leaves(1, 2);
  SchedulerConfig cfg;
  cfg.preemption.mode = PreemptionMode::kPriority;
  MiniCluster c(t, cfg);
  c.windows = {Window("r", 1000, 2000, {0})};
  const JobId low1 = c.Submit(Whole(*t, 1, 8), 0, 5000, 5000);
  c.Step(0);
  ASSERT_EQ(c.AssignmentOf(low1).tasks[0].node, 1u);
  const JobId low0 = c.Submit(Whole(*t, 1, 8), 1, 100, 100);  // ends before the window
  c.Step(1);
  ASSERT_EQ(c.AssignmentOf(low0).tasks[0].node, 0u);
  // Outranks both, and low0 has lost the least work; but it may not run on node 0 (its limit
  // crosses the window): it preempts low1.
  const JobId high = c.Submit(Whole(*t, 1, 8), 2, 5000, 5000, 10);
  Decisions d = c.Step(2);
  ASSERT_EQ(d.preemptions.size(), 1u);
  EXPECT_EQ(d.preemptions[0].victim, low1);
  EXPECT_TRUE(c.IsRunning(high));
  EXPECT_TRUE(c.IsRunning(low0));
}

}  // namespace
}  // namespace hangar::sched
