// Rolling maintenance in the controller's state (docs/maintenance.md): batches drained with the
// checkpoint signal, commands sent only to nodes that hold no work, validation before a node
// returns, the first failure stopping the run, and a run resumed by a restarted controller.
#include <gtest/gtest.h>

#include "cluster/cluster_yaml.h"
#include "controller/state/cluster_state.h"
#include "controller/state/state_test_util.h"

namespace hangar::controller {
namespace {

constexpr const char* kCluster =
    "node_defaults: {gpus: 8, gpu_model: H100, gpu_memory: 80Gi, cpu: 64, memory: 512Gi}\n"
    "nodes: [{name: n-1}, {name: n-2}, {name: n-3}, {name: n-4}]\n";

class MaintenanceStateTest : public ::testing::Test {
 protected:
  void SetUp() override {
    store_ = NewMemoryStore();
    state_ = Make();
    for (int i = 1; i <= 4; ++i) Register("n-" + std::to_string(i));
    Commit(At(now_));
    for (int i = 1; i <= 4; ++i) Validate("n-" + std::to_string(i));
    Commit(At(now_));
    ASSERT_EQ(state_->GetNode("n-4")->state, "ready");
  }

  static std::unique_ptr<ClusterState> Make() {
    auto f = cluster::ParseClusterYaml(kCluster, "c.yaml");
    EXPECT_TRUE(f.ok());
    return std::make_unique<ClusterState>(f->topology, ControllerOptions{},
                                          sched::Scheduler::Create({}).value());
  }

  void Register(const std::string& node) {
    pb::Register r;
    r.mutable_inventory()->set_node(node);
    for (int g = 0; g < 8; ++g) r.mutable_inventory()->add_gpus()->set_index(g);
    Effects fx;
    ASSERT_TRUE(state_->OnRegister(r, now_, &fx).ok());
    Commit(fx);
  }

  void Validate(const std::string& node) {
    pb::ValidationResult v;
    v.set_json(testing::HealthyValidationJson());
    v.set_ok(true);
    state_->OnValidation(node, v, now_);
  }

  // What reaches the store, as the state owner commits it.
  void Commit(const Effects& fx) { ASSERT_TRUE(store_->Commit(fx.batch).ok()); }

  // The state owner's timers: the tick, the health rules, a cycle.
  Effects At(Time t) {
    now_ = t;
    Effects fx;
    state_->Tick(now_, &fx);
    state_->EvaluateHealth(now_, &fx);
    state_->Schedule(now_, &fx);
    return fx;
  }
  Effects Step() {
    Effects fx = At(now_ + kSecond);
    Commit(fx);
    return fx;
  }

  static std::vector<std::string> CommandsTo(const Effects& fx) {
    std::vector<std::string> out;
    for (const auto& m : fx.messages) {
      if (m.message.has_maintenance_command()) out.push_back(m.node);
    }
    return out;
  }

  Status Answer(const std::string& node, int exit_code, const std::string& output = "") {
    pb::MaintenanceResult r;
    r.set_id(state_->MaintenanceJson(0)->at("id").dump() + "/" + node);
    r.set_exit_code(exit_code);
    r.set_output(output);
    Effects fx;
    Status s = state_->OnMaintenanceResult(node, r, now_, &fx);
    Commit(fx);
    return s;
  }

  std::string StepOf(const std::string& node) {
    const nlohmann::json run = *state_->MaintenanceJson(0);  // the loop must not outlive it
    for (const auto& n : run.at("nodes")) {
      if (n["node"] == node) return n["step"];
    }
    return "";
  }

  // Node `node` answered its command with success and passed the validation that follows.
  void CommandAndValidation(const std::string& node) {
    ASSERT_TRUE(Answer(node, 0, "flashed\n").ok());
    Step();  // the health rules ask for the validation
    Validate(node);
    Step();
    Step();
    ASSERT_EQ(state_->GetNode(node)->state, "ready");
  }

  static std::string RollingReason() { return "maintenance run 1 (`hangar maintain status 1`)"; }

  std::unique_ptr<StateStore> store_;
  std::unique_ptr<ClusterState> state_;
  Principal admin_{"ops", Role::kAdmin};
  Time now_ = 1'799'056'800'000;
};

TEST_F(MaintenanceStateTest, BatchesCheckpointTheirJobsRunValidateAndStopAtAFailure) {
  auto spec = job::ParseJobSpec(
      "name: train\ncheckpoint: {signal: USR1, grace: 5m}\ntasks:\n  - {gpus: 8, command: [t]}\n",
      "j.yaml");
  ASSERT_TRUE(spec.ok());
  Effects submitted;
  auto job = state_->Submit(*spec, now_, &submitted);
  ASSERT_TRUE(job.ok());
  Commit(submitted);
  Step();
  ASSERT_EQ(state_->GetJob(*job)->task_views[0].node, "n-1");

  Effects fx;
  auto run = state_->StartMaintenance(
      admin_, {{"nodes", "n-[1-4]"}, {"batch", 2}, {"run", "/opt/fw.sh"}}, now_, &fx);
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  Commit(fx);
  EXPECT_EQ(state_->GetNode("n-1")->reason, RollingReason());
  // n-2 holds no work: its command goes at once. n-1's job gets its checkpoint signal first.
  EXPECT_EQ(CommandsTo(fx), std::vector<std::string>{"n-2"});
  Effects drained = Step();
  bool signalled = false;
  for (const auto& m : drained.messages) {
    signalled = signalled || (m.node == "n-1" && m.message.has_stop() &&
                              m.message.stop().checkpoint_signal() == 10);
  }
  EXPECT_TRUE(signalled);
  EXPECT_TRUE(CommandsTo(drained).empty());  // not while the job still stops there
  pb::TaskStatus ended;
  ended.set_task_id(std::to_string(*job) + ".0.0");
  ended.set_state(pb::TaskStatus::EXITED);
  ended.set_stopped(true);
  Effects stop;
  ASSERT_TRUE(state_->OnTaskStatus("n-1", ended, now_, &stop).ok());
  Commit(stop);
  EXPECT_EQ(CommandsTo(Step()), std::vector<std::string>{"n-1"});
  // The job resumes on a node of the next batch.
  const std::string again = state_->GetJob(*job)->task_views[0].node;
  ASSERT_TRUE(again == "n-3" || again == "n-4") << again;
  const std::string other = again == "n-3" ? "n-4" : "n-3";

  // A node answering for another's command is not heard.
  pb::MaintenanceResult foreign;
  foreign.set_id("1/n-1");
  Effects ignored;
  EXPECT_EQ(state_->OnMaintenanceResult("n-2", foreign, now_, &ignored).code(),
            StatusCode::kNotFound);
  CommandAndValidation("n-1");
  CommandAndValidation("n-2");
  EXPECT_EQ(StepOf("n-1"), "done");
  // Batch 2: the job's node drains with it; the other node's command fails.
  Step();
  EXPECT_EQ(StepOf(other), "running");
  EXPECT_EQ(StepOf(again), "draining");
  ASSERT_TRUE(Answer(other, 2, "checking board...\nboard revision not supported\n").ok());
  Step();
  const nlohmann::json r = *state_->MaintenanceJson(1);
  EXPECT_EQ(r["state"], "failed");
  EXPECT_EQ(r["failure"], other +
                              ": its command exited with status 2 (last line: board revision not "
                              "supported)");
  // The job's node never ran its command: it goes back to service; the failed one stays out.
  EXPECT_EQ(StepOf(again), "skipped");
  EXPECT_EQ(state_->GetNode(other)->state, "drained");
  EXPECT_NE(state_->GetNode(again)->reason, RollingReason());
}

// The controller stops with a batch out of service and a command under way; a new one restores
// the run from the store, sends the command again, and walks on.
TEST_F(MaintenanceStateTest, ARestartedControllerResumesTheRun) {
  Effects fx;
  ASSERT_TRUE(
      state_->StartMaintenance(admin_, {{"nodes", "all"}, {"batch", 2}, {"run", "x"}}, now_, &fx)
          .ok());
  Commit(fx);
  CommandAndValidation("n-1");
  EXPECT_EQ(StepOf("n-2"), "running");

  state_ = Make();
  auto contents = store_->Load();
  ASSERT_TRUE(contents.ok());
  ASSERT_TRUE(state_->Restore(*contents, now_).ok());
  for (int i = 1; i <= 4; ++i) Register("n-" + std::to_string(i));
  EXPECT_EQ(CommandsTo(Step()), std::vector<std::string>{"n-2"});
  CommandAndValidation("n-2");
  Step();
  EXPECT_EQ(StepOf("n-3"), "running");
  CommandAndValidation("n-3");
  CommandAndValidation("n-4");
  Step();
  EXPECT_EQ(state_->MaintenanceJson(0)->at("state"), "succeeded");
}

// What a run leaves drained across a restart must come back with undrain: a drain survives the
// restart as the drain it was, not as a quarantine that waits for a remedy.
TEST_F(MaintenanceStateTest, ADrainSurvivesARestartAsADrain) {
  Effects fx;
  ASSERT_TRUE(state_->Drain("n-4", "new cables", now_, &fx).ok());
  Commit(fx);
  Step();
  Step();
  ASSERT_EQ(state_->GetNode("n-4")->state, "drained");
  state_ = Make();
  ASSERT_TRUE(state_->Restore(*store_->Load(), now_).ok());
  for (int i = 1; i <= 4; ++i) Register("n-" + std::to_string(i));
  Step();
  EXPECT_EQ(state_->GetNode("n-4")->state, "drained");
  EXPECT_EQ(state_->GetNode("n-4")->reason, "new cables");
  Effects undrained;
  ASSERT_TRUE(state_->Undrain("n-4", now_, &undrained).ok());
  Commit(undrained);
  Step();
  Step();
  EXPECT_EQ(state_->GetNode("n-4")->state, "pending_validation");
  Validate("n-4");
  Step();
  EXPECT_EQ(state_->GetNode("n-4")->state, "ready");
}

}  // namespace
}  // namespace hangar::controller
