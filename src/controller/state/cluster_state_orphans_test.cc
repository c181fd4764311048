// Tasks that agents report but the store does not know are held, running, until an operator
// decides; tasks of attempts the store knows are over are stopped, as before.
#include <gtest/gtest.h>

#include "cluster/cluster_yaml.h"
#include "controller/state/cluster_state.h"
#include "controller/state/state_test_util.h"
#include "controller/store/state_store.h"

namespace hangar::controller {
namespace {

class OrphansTest : public ::testing::Test {
 protected:
  std::unique_ptr<ClusterState> Make() {
    auto topology = testing::TwoNodeTopology();
    EXPECT_TRUE(topology);
    ControllerOptions o;
    o.require_validation = false;
    return std::make_unique<ClusterState>(topology, o,
                                          std::move(sched::Scheduler::Create({})).value());
  }
  static pb::Register Reg(const std::string& node, std::vector<std::string> running = {}) {
    pb::Register r;
    r.mutable_inventory()->set_node(node);
    r.mutable_inventory()->set_address(node == "a" ? "127.0.0.1" : "127.0.0.2");
    for (int i = 0; i < 8; ++i) r.mutable_inventory()->add_gpus()->set_index(i);
    for (const auto& id : running) r.add_running()->set_task_id(id);
    return r;
  }
  static job::JobSpec Spec(const std::string& yaml) { return *job::ParseJobSpec(yaml, "job.yaml"); }
  static std::vector<std::string> Stopped(const Effects& fx) {
    std::vector<std::string> out;
    for (const auto& m : fx.messages) {
      if (m.message.has_registered()) {
        for (const auto& id : m.message.registered().stop_tasks()) out.push_back(id);
      }
      if (m.message.has_stop()) out.push_back(m.message.stop().task_id());
    }
    return out;
  }
  static std::string Events(const Effects& fx) {
    std::string all;
    for (const auto& e : fx.batch.events) all += e.subject + ": " + e.message + "\n";
    return all;
  }
  // A controller restored from a store that does not have job 1 (an older backup), to which node
  // a's agent reports task 1.0.0 still running.
  std::unique_ptr<ClusterState> RestoredWithoutTheJob(Effects* rec) {
    auto store = NewMemoryStore();
    auto again = Make();
    EXPECT_TRUE(again->Restore(*store->Load(), 100).ok());
    EXPECT_TRUE(again->OnRegister(Reg("a", {"1.0.0"}), 101, rec).ok());
    EXPECT_TRUE(again->OnRegister(Reg("b"), 101, rec).ok());
    return again;
  }
};

TEST_F(OrphansTest, ATaskTheStoreDoesNotKnowIsHeldRunningAndShown) {
  Effects rec;
  auto state = RestoredWithoutTheJob(&rec);
  EXPECT_TRUE(Stopped(rec).empty()) << "the agent was told to stop a task the store had lost";
  auto node = state->GetNode("a");
  ASSERT_TRUE(node.ok());
  EXPECT_EQ(node->state, "orphans-held");
  ASSERT_FALSE(node->conditions.empty());
  EXPECT_NE(node->conditions.back().find(
                "OrphansHeld: it runs 1 task(s) the store does not know (1.0.0)"),
            std::string::npos)
      << node->conditions.back();
  EXPECT_NE(Events(rec).find(
                "node/a: runs 1 task(s) the store does not know (1.0.0): held, still running"),
            std::string::npos)
      << Events(rec);
  EXPECT_EQ(state->next_job_id(), 2u)
      << "job 1's id is taken: a new job must not share its task ids";
  // Node a takes no work while it holds the task: a gang of both nodes does not start.
  Effects fx;
  ASSERT_TRUE(
      state->Submit(Spec("name: g\ntasks:\n  - {replicas: 2, gpus: 8, command: [x]}\n"), 102, &fx)
          .ok());
  state->Schedule(103, &fx);
  EXPECT_EQ(state->GetJob(2)->state, "pending");
}

TEST_F(OrphansTest, TheOperatorStopsThem) {
  Effects rec;
  auto state = RestoredWithoutTheJob(&rec);
  Effects fx;
  ASSERT_TRUE(state->DecideHeldOrphans("a", ClusterState::OrphanDecision::kStop, 200, &fx).ok());
  EXPECT_EQ(Stopped(fx), std::vector<std::string>{"1.0.0"});
  EXPECT_NE(Events(fx).find("the operator stopped the tasks unknown to the store (1.0.0)"),
            std::string::npos);
  EXPECT_EQ(state->GetNode("a")->state, "recovering") << "until the task has ended";
  pb::TaskStatus ended;
  ended.set_task_id("1.0.0");
  ended.set_state(pb::TaskStatus::EXITED);
  ASSERT_TRUE(state->OnTaskStatus("a", ended, 201, &fx).ok());
  EXPECT_EQ(state->GetNode("a")->state, "ready");
  EXPECT_EQ(state->DecideHeldOrphans("a", ClusterState::OrphanDecision::kStop, 202, &fx).code(),
            StatusCode::kFailedPrecondition);
}

TEST_F(OrphansTest, TheOperatorReleasesThem) {
  Effects rec;
  auto state = RestoredWithoutTheJob(&rec);
  Effects fx;
  ASSERT_TRUE(state->DecideHeldOrphans("a", ClusterState::OrphanDecision::kRelease, 200, &fx).ok());
  EXPECT_TRUE(Stopped(fx).empty());
  EXPECT_EQ(state->GetNode("a")->state, "ready");
  EXPECT_NE(Events(fx).find("released the tasks unknown to the store (1.0.0): they run on"),
            std::string::npos);
}

TEST_F(OrphansTest, AHeldTaskThatEndsByItselfIsForgotten) {
  Effects rec;
  auto state = RestoredWithoutTheJob(&rec);
  Effects fx;
  pb::TaskStatus ended;
  ended.set_task_id("1.0.0");
  ended.set_state(pb::TaskStatus::EXITED);
  ASSERT_TRUE(state->OnTaskStatus("a", ended, 150, &fx).ok());
  EXPECT_EQ(state->GetNode("a")->state, "ready");
  EXPECT_NE(Events(fx).find("task 1.0.0, unknown to the store, ended by itself"),
            std::string::npos);
}

// An attempt the store knows is over (the job was requeued since) is stopped at once, as before.
TEST_F(OrphansTest, ATaskOfAnAttemptTheStoreKnowsIsOverIsStopped) {
  auto state = Make();
  Effects fx;
  ASSERT_TRUE(state->OnRegister(Reg("a"), 0, &fx).ok());
  ASSERT_TRUE(state->OnRegister(Reg("b"), 0, &fx).ok());
  ASSERT_TRUE(state->Submit(Spec("name: one\ntasks: [{gpus: 8, command: [x]}]\n"), 1, &fx).ok());
  ASSERT_TRUE(state->Cancel(1, 2, &fx).ok());
  auto store = NewMemoryStore();
  ASSERT_TRUE(store->Commit(fx.batch).ok());
  auto again = Make();
  ASSERT_TRUE(again->Restore(*store->Load(), 100).ok());
  Effects rec;
  ASSERT_TRUE(again->OnRegister(Reg("a", {"1.0.0"}), 101, &rec).ok());
  EXPECT_EQ(Stopped(rec), std::vector<std::string>{"1.0.0"}) << "job 1 ended: its task is old news";
  EXPECT_EQ(again->GetNode("a")->state, "recovering");
}

}  // namespace
}  // namespace hangar::controller
