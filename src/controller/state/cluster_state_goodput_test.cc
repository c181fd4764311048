// The controller's goodput accounting through a real interruption: a gang that reports progress
// and checkpoints, is found hung, restarts from its checkpoint, and is restored from the store
// by a restarted controller with the same figures.
#include <gtest/gtest.h>

#include "cluster/cluster_yaml.h"
#include "controller/state/cluster_state.h"
#include "controller/state/state_test_util.h"

namespace hangar::controller {
namespace {

class GoodputStateTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto topology = testing::TwoNodeTopology();
    ASSERT_TRUE(topology);
    topology_ = topology;
    state_ = Make();
    for (const char* n : {"a", "b"}) {
      pb::Register r;
      r.mutable_inventory()->set_node(n);
      r.mutable_inventory()->set_address(std::string("127.0.0.") + (n[0] == 'a' ? "1" : "2"));
      for (int i = 0; i < 8; ++i) r.mutable_inventory()->add_gpus()->set_index(i);
      ASSERT_TRUE(state_->OnRegister(r, 0, &fx_).ok());
    }
  }
  std::unique_ptr<ClusterState> Make() {
    ControllerOptions o;
    o.require_validation = false;
    return std::make_unique<ClusterState>(topology_, o,
                                          std::move(sched::Scheduler::Create({})).value());
  }
  void Status(const std::string& node, const std::string& task, pb::TaskStatus::State st,
              Time now) {
    pb::TaskStatus s;
    s.set_task_id(task);
    s.set_state(st);
    s.set_stopped(st == pb::TaskStatus::EXITED);
    ASSERT_TRUE(state_->OnTaskStatus(node, s, now, &fx_).ok());
  }
  void Report(const std::string& node, const std::string& task, uint64_t step, Time now) {
    pb::Progress p;
    p.set_task_id(task);
    p.set_step(step);
    p.set_step_time_us(1'000'000);
    ASSERT_TRUE(state_->OnProgress(node, p, now, &fx_).ok());
  }
  std::shared_ptr<const cluster::Topology> topology_;
  std::unique_ptr<ClusterState> state_;
  Effects fx_;  // everything, committed to a store at the end
};

TEST_F(GoodputStateTest, AHungGangsLostWorkRestartAndWaitAreCountedAndSurviveARestart) {
  auto spec = job::ParseJobSpec(
      "name: train\nprogress: {hang_timeout: 10s}\ncheckpoint: {signal: SIGUSR1, grace: 3s}\n"
      "tasks:\n  - {replicas: 2, gpus: 8, command: [train]}\n",
      "job.yaml");
  ASSERT_TRUE(spec.ok()) << spec.status().message();
  ASSERT_TRUE(state_->Submit(*spec, 0, &fx_).ok());
  state_->Schedule(1, &fx_);  // attempt 0 placed at 1
  Status("a", "1.0.0", pb::TaskStatus::RUNNING, 1'000);
  Status("b", "1.0.1", pb::TaskStatus::RUNNING, 1'000);
  for (uint64_t step = 1; step <= 29; ++step) {  // a step a second from 2 s, then silence
    Report("a", "1.0.0", step, 1'000 + static_cast<Time>(step) * 1'000);
    Report("b", "1.0.1", step, 1'000 + static_cast<Time>(step) * 1'000);
  }
  pb::CheckpointDone c;
  c.set_task_id("1.0.0");
  c.set_step(19);
  ASSERT_TRUE(state_->OnCheckpointDone("a", c, 20'000, &fx_).ok());
  state_->Tick(40'000, &fx_);  // silent since 30 s: hung, restarted
  ASSERT_EQ(state_->GetJob(1)->state, "preempting");
  Status("a", "1.0.0", pb::TaskStatus::EXITED, 42'000);
  Status("b", "1.0.1", pb::TaskStatus::EXITED, 42'000);
  state_->Schedule(43'000, &fx_);  // attempt 1
  ASSERT_EQ(state_->GetJob(1)->attempt, 1u);
  Status("a", "1.1.0", pb::TaskStatus::RUNNING, 44'000);
  Status("b", "1.1.1", pb::TaskStatus::RUNNING, 44'000);
  Report("a", "1.1.0", 20, 46'000);  // resumed from the checkpoint's step 19

  const nlohmann::json g = state_->goodput().Json(1, 50'000);
  ASSERT_FALSE(g.is_null());
  EXPECT_EQ(g["wall_ms"], 49'999);
  EXPECT_EQ(g["parts"]["setup"]["ms"], 1'999);                // placed at 1, first report at 2 s
  EXPECT_EQ(g["parts"]["productive"]["ms"], 18'000 + 4'000);  // to the checkpoint; since 46 s
  EXPECT_EQ(g["parts"]["lost_work"]["ms"], 20'000);           // 10 steps redone and 10 s of silence
  EXPECT_EQ(g["parts"]["requeue_wait"]["ms"], 3'000);         // stopping, then the next cycle
  EXPECT_EQ(g["parts"]["restart"]["ms"], 3'000);  // placed at 43 s, first report at 46 s
  EXPECT_DOUBLE_EQ(g["parts"]["lost_work"]["gpu_hours"].get<double>(), 16.0 * 20 / 3600);
  EXPECT_EQ(g["by_cause"]["hang"]["count"], 1);
  EXPECT_EQ(g["recent"][0]["lost_basis"], "steps");
  EXPECT_EQ(g["recent"][0]["restart_ms"], 3'000);  // under way: counted so far
  EXPECT_EQ(g["recent"][0]["why"].get<std::string>().rfind("hung: ", 0), 0u);

  // A controller restarted from the store reports the same, and the cluster's figure with it.
  auto store = NewMemoryStore();
  ASSERT_TRUE(store->Commit(fx_.batch).ok());
  auto again = Make();
  ASSERT_TRUE(again->Restore(*store->Load(), 50'000).ok());
  EXPECT_EQ(again->goodput().Json(1, 50'000), g);
  EXPECT_EQ(again->goodput().ClusterJson(50'000), state_->goodput().ClusterJson(50'000));
  EXPECT_DOUBLE_EQ(again->goodput().ClusterJson(50'000)["ettr"].get<double>(), 22'000.0 / 49'999);
}

}  // namespace
}  // namespace hangar::controller
