// The node lease (docs/operations.md, "The node lease"): the controller grants it at every
// registration and heartbeat, and starts the next attempt of a lost node's job only once the lease
// it last granted that node has run out (its fence has stopped the task by then).
#include <gtest/gtest.h>

#include "cluster/cluster_yaml.h"
#include "controller/state/cluster_state.h"
#include "controller/state/state_test_util.h"

namespace hangar::controller {
namespace {

class FenceStateTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto topology = testing::TwoNodeTopology();
    ASSERT_TRUE(topology);
    ControllerOptions o;
    o.require_validation = false;
    o.node_lease = 10 * kSecond;
    state_ = std::make_unique<ClusterState>(topology, o,
                                            std::move(sched::Scheduler::Create({})).value());
  }
  pb::Register Reg(const std::string& node) {
    pb::Register r;
    r.mutable_inventory()->set_node(node);
    for (int i = 0; i < 8; ++i) r.mutable_inventory()->add_gpus()->set_index(i);
    r.set_lease_clock_ms(777);  // an agent that keeps a fence
    return r;
  }
  // One job of 8 GPUs, running at 1000 on the node it returns.
  std::string RunOneJob(Effects* fx) {
    auto spec = job::ParseJobSpec("name: j\ntasks: [{gpus: 8, command: [x]}]\n", "j.yaml");
    EXPECT_TRUE(spec.ok());
    EXPECT_TRUE(state_->Submit(*spec, 0, fx).ok());
    state_->Schedule(500, fx);
    const std::string node = state_->GetJob(1)->task_views[0].node;
    pb::TaskStatus s;
    s.set_task_id("1.0.0");
    s.set_state(pb::TaskStatus::RUNNING);
    EXPECT_TRUE(state_->OnTaskStatus(node, s, 1000, fx).ok());
    return node;
  }
  // Heartbeats of `node` every 100 ms from `from` to `to` (so the controller hears the fleet).
  void Beat(const std::string& node, Time from, Time to, Effects* fx) {
    pb::Heartbeat hb;
    hb.set_lease_clock_ms(1);
    for (Time t = from; t <= to; t += 100) {
      hb.set_time_ms(t);
      state_->OnHeartbeat(node, hb, t, fx);
    }
  }
  std::unique_ptr<ClusterState> state_;
};

TEST_F(FenceStateTest, RegistrationAndHeartbeatsGrantTheLease) {
  Effects fx;
  ASSERT_TRUE(state_->OnRegister(Reg("a"), 0, &fx).ok());
  ASSERT_FALSE(fx.messages.empty());
  const pb::Registered& ok = fx.messages.front().message.registered();
  EXPECT_EQ(ok.lease_ms(), 10 * kSecond);
  EXPECT_EQ(ok.lease_clock_ms(), 777) << "echoed: the agent counts from when it asked";
  Effects beat;
  pb::Heartbeat hb;
  hb.set_seq(5);
  hb.set_lease_clock_ms(4242);
  ASSERT_TRUE(state_->OnHeartbeat("a", hb, 100, &beat));
  ASSERT_EQ(beat.messages.size(), 1u);
  EXPECT_EQ(beat.messages[0].message.lease().lease_clock_ms(), 4242);
  EXPECT_EQ(beat.messages[0].message.lease().seq(), 5u);
  EXPECT_EQ(beat.messages[0].message.lease().lease_ms(), 10 * kSecond);
}

TEST_F(FenceStateTest, TheNextAttemptWaitsForTheLostNodesLease) {
  Effects fx;
  ASSERT_TRUE(state_->OnRegister(Reg("a"), 0, &fx).ok());
  ASSERT_TRUE(state_->OnRegister(Reg("b"), 0, &fx).ok());
  const std::string lost = RunOneJob(&fx);
  const std::string other = lost == "a" ? "b" : "a";
  Beat(lost, 100, 2000, &fx);  // its last lease: until 2000 + 10 s
  Beat(other, 100, 6000, &fx);
  Effects check;
  state_->CheckHeartbeats(6000, &check);  // silent for 4 s: lost, its job queued again
  ASSERT_EQ(state_->GetNode(lost)->state, "lost");
  EXPECT_EQ(state_->GetJob(1)->state, "preempting");
  state_->Schedule(6000, &check);
  EXPECT_EQ(state_->GetJob(1)->state, "preempting") << "its task may still run on " << lost;
  bool said = false;
  for (const auto& e : check.batch.events)
    said |= e.message.find("lease has run out") != std::string::npos;
  EXPECT_TRUE(said);
  // Just before the lease (and its margin) has run out: still waiting.
  Beat(other, 6100, 12400, &fx);
  Effects before;
  state_->CheckHeartbeats(12400, &before);
  state_->Schedule(12400, &before);
  EXPECT_EQ(state_->GetJob(1)->state, "preempting");
  Beat(other, 12500, 12600, &fx);
  Effects after;
  state_->CheckHeartbeats(12600, &after);
  state_->Schedule(12600, &after);
  auto job = state_->GetJob(1);
  EXPECT_NE(job->state, "pending") << job->reason;
  ASSERT_FALSE(job->task_views.empty());
  EXPECT_EQ(job->task_views[0].node, other);
}

TEST_F(FenceStateTest, ALostNodeThatComesBackEndsTheWaitWithItsReport) {
  Effects fx;
  ASSERT_TRUE(state_->OnRegister(Reg("a"), 0, &fx).ok());
  ASSERT_TRUE(state_->OnRegister(Reg("b"), 0, &fx).ok());
  const std::string lost = RunOneJob(&fx);
  const std::string other = lost == "a" ? "b" : "a";
  Beat(lost, 100, 2000, &fx);
  Beat(other, 100, 6000, &fx);
  state_->CheckHeartbeats(6000, &fx);
  ASSERT_EQ(state_->GetNode(lost)->state, "lost");
  // Back, without the task (it ended while the node was away): nothing runs there any more.
  Effects back;
  ASSERT_TRUE(state_->OnRegister(Reg(lost), 6500, &back).ok());
  state_->Schedule(6500, &back);
  EXPECT_NE(state_->GetJob(1)->state, "pending");
}

}  // namespace
}  // namespace hangar::controller
