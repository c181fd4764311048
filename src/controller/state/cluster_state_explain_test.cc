// What a job's and a node's reason say: nodes that never registered, and a running job's place
// instead of an earlier attempt's message.
#include <gtest/gtest.h>

#include "cluster/cluster_yaml.h"
#include "controller/state/cluster_state.h"
#include "controller/state/state_test_util.h"

namespace hangar::controller {
namespace {

class ExplainTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto topology = testing::TwoNodeTopology();
    ASSERT_TRUE(topology);
    ControllerOptions o;
    o.require_validation = false;
    state_ = std::make_unique<ClusterState>(topology, o, sched::Scheduler::Create({}).value());
  }
  void Register(const std::string& node, Time now) {
    pb::Register r;
    r.mutable_inventory()->set_node(node);
    for (int i = 0; i < 8; ++i) r.mutable_inventory()->add_gpus()->set_index(i);
    Effects fx;
    ASSERT_TRUE(state_->OnRegister(r, now, &fx).ok());
  }
  void Running(const std::string& node, const std::string& task, Time now) {
    pb::TaskStatus s;
    s.set_task_id(task);
    s.set_state(pb::TaskStatus::RUNNING);
    Effects fx;
    ASSERT_TRUE(state_->OnTaskStatus(node, s, now, &fx).ok());
  }
  void Submit(const std::string& yaml) {
    auto spec = job::ParseJobSpec(yaml, "job.yaml");
    ASSERT_TRUE(spec.ok());
    Effects fx;
    ASSERT_TRUE(state_->Submit(*spec, 1, &fx).ok());
  }
  std::unique_ptr<ClusterState> state_;
};

constexpr const char* kGang = "name: gang\ntasks:\n  - {replicas: 2, gpus: 8, command: [train]}\n";

TEST_F(ExplainTest, AJobWaitingForNodesThatNeverRegisteredSaysSo) {
  Submit(kGang);
  Effects fx;
  state_->Schedule(2, &fx);
  auto j = state_->GetJob(1);
  EXPECT_EQ(j->state, "pending");
  EXPECT_EQ(j->reason,
            "fits only on nodes that have not registered: no agent has connected for a, b; start "
            "`hangar agent` "
            "there (`hangar nodes` shows them as unknown)");
  auto n = state_->GetNode("a");
  EXPECT_EQ(n->state, "unknown");
  EXPECT_EQ(n->reason, "no agent has connected yet: start `hangar agent` on it");
  // One registered and drained, one never registered: both causes are named.
  Register("a", 3);
  ASSERT_TRUE(state_->Drain("a", "maintenance", 3, &fx).ok());
  state_->Schedule(4, &fx);
  j = state_->GetJob(1);
  EXPECT_NE(j->reason.find("; of them, b have not registered (no agent has connected)"),
            std::string::npos)
      << j->reason;
}

TEST_F(ExplainTest, ARunningJobSaysWhereItRunsNotWhyItOnceWaited) {
  Register("a", 0);
  Register("b", 0);
  Submit(kGang);
  Effects fx;
  state_->Schedule(2, &fx);
  Running("a", "1.0.0", 3);
  Running("b", "1.0.1", 3);
  pb::Heartbeat hb;
  state_->OnHeartbeat("a", hb, 3000);
  state_->CheckHeartbeats(3500, &fx);  // b went silent: the gang is requeued
  ASSERT_NE(state_->GetJob(1)->message.find("node b lost"), std::string::npos);
  pb::TaskStatus exited;
  exited.set_task_id("1.0.0");
  exited.set_state(pb::TaskStatus::EXITED);
  ASSERT_TRUE(state_->OnTaskStatus("a", exited, 3600, &fx).ok());
  Register("b", 3700);
  state_->Schedule(3900, &fx);
  Running("a", "1.1.0", 4000);
  Running("b", "1.1.1", 4000);
  auto j = state_->GetJob(1);
  ASSERT_EQ(j->state, "running");
  EXPECT_EQ(j->reason.find("lost"), std::string::npos) << j->reason;
  EXPECT_EQ(j->reason.rfind("on a and b since ", 0), 0u) << j->reason;
  EXPECT_NE(j->reason.find("(attempt 1)"), std::string::npos) << j->reason;
}

}  // namespace
}  // namespace hangar::controller
