// The controller and the health rules together: what a fault does to the cluster.
#include <gtest/gtest.h>

#include "cluster/cluster_yaml.h"
#include "controller/state/cluster_state.h"
#include "controller/state/state_test_util.h"

namespace hangar::controller {
namespace {

constexpr const char* kGang = "name: gang\ntasks:\n  - {replicas: 2, gpus: 8, command: [train]}\n";

class HealthLoopTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto f = cluster::ParseClusterYaml(
        "node_defaults: {gpus: 8, gpu_model: H100, gpu_memory: 80Gi, cpu: 64, memory: 512Gi}\n"
        "nodes: [{name: \"n-[1-4]\"}]\n",
        "c.yaml");
    ASSERT_TRUE(f.ok());
    auto s = sched::Scheduler::Create({});
    state_ = std::make_unique<ClusterState>(f->topology, ControllerOptions{}, std::move(s).value());
    for (int i = 1; i <= 4; ++i) {
      pb::Register r;
      r.mutable_inventory()->set_node("n-" + std::to_string(i));
      for (int g = 0; g < 8; ++g) r.mutable_inventory()->add_gpus()->set_index(g);
      Effects fx;
      ASSERT_TRUE(state_->OnRegister(r, now_, &fx).ok());
    }
  }

  std::string Validation(double gemm_on_gpu3 = 700) {
    return testing::HealthyValidationJson(gemm_on_gpu3);
  }

  void Validate(const std::string& node, const std::string& json) {
    pb::ValidationResult v;
    v.set_json(json);
    v.set_ok(true);
    state_->OnValidation(node, v, now_);
  }

  // Validation for every node: all pass.
  void ValidateAll() {
    Effects fx;
    state_->EvaluateHealth(now_, &fx);
    int asked = 0;
    for (const auto& m : fx.messages) asked += m.message.has_validate();
    EXPECT_EQ(asked, 4);
    for (int i = 1; i <= 4; ++i) Validate("n-" + std::to_string(i), Validation());
    Tick();
  }

  Effects Tick() {
    now_ += 1000;
    Effects fx;
    state_->EvaluateHealth(now_, &fx);
    return fx;
  }

  sched::JobId RunGang() {
    Effects fx;
    auto id = state_->Submit(*job::ParseJobSpec(kGang, "j"), now_, &fx);
    EXPECT_TRUE(id.ok());
    state_->Schedule(now_, &fx);
    return *id;
  }

  std::unique_ptr<ClusterState> state_;
  Time now_ = 1'000'000;
};

TEST_F(HealthLoopTest, NoWorkUntilValidationPasses) {
  sched::JobId id = RunGang();
  EXPECT_EQ(state_->GetJob(id)->state, "pending");
  EXPECT_EQ(state_->GetNode("n-1")->state, "pending_validation");
  ValidateAll();
  EXPECT_EQ(state_->GetNode("n-1")->state, "ready");
  Effects fx;
  state_->Schedule(now_, &fx);
  EXPECT_EQ(state_->GetJob(id)->state, "starting");
}

// An evaluation takes every observation before it: the state thread does not run the rules again
// until something changes or the health interval passes. (Once anything had been observed, every
// pass of the state thread ran them again: the flag that asked for it was never cleared.)
TEST_F(HealthLoopTest, RulesRunAgainOnlyAfterAChangeOrTheInterval) {
  ValidateAll();
  EXPECT_FALSE(state_->NeedsHealth(now_)) << "the evaluation at this time took every observation";
  pb::GpuEvent xid;
  xid.set_index(2);
  xid.set_kind("xid");
  xid.set_code(79);
  state_->OnGpuEvent("n-1", xid, now_);
  EXPECT_TRUE(state_->NeedsHealth(now_));
  Tick();
  Tick();  // the drain's own follow-up (its work off) has run too
  EXPECT_FALSE(state_->NeedsHealth(now_));
  EXPECT_TRUE(state_->NeedsHealth(now_ + state_->options().health_interval));
}

TEST_F(HealthLoopTest, Xid79DrainsTheNodeAndRequeuesTheGangWhole) {
  ValidateAll();
  sched::JobId id = RunGang();
  const std::string victim = state_->GetJob(id)->task_views[0].node;
  pb::GpuEvent xid;
  xid.set_index(2);
  xid.set_kind("xid");
  xid.set_code(79);
  state_->OnGpuEvent(victim, xid, now_);
  Effects fx = Tick();
  auto job = state_->GetJob(id);
  EXPECT_EQ(job->state, "preempting");
  EXPECT_EQ(job->attempt, 1u);
  EXPECT_NE(job->message.find("draining"), std::string::npos) << job->message;
  EXPECT_EQ(state_->GetNode(victim)->state, "draining");
  int signals = 0, stops = 0;
  for (const auto& m : fx.messages) {
    signals +=
        m.message.has_stop() && m.message.stop().checkpoint_signal() == 10;  // checkpoint first
    stops += m.message.has_stop();
  }
  EXPECT_EQ(signals, 2);
  EXPECT_EQ(stops, 2);
  bool explained = false;
  for (const auto& e : fx.batch.events)
    explained |= e.message.find("draining") != std::string::npos;
  EXPECT_TRUE(explained);
  // Not while its tasks are still checkpointing and stopping: two attempts never run at once.
  Effects early;
  state_->Schedule(now_, &early);
  job = state_->GetJob(id);
  EXPECT_EQ(job->state, "preempting");
  EXPECT_TRUE(job->task_views.empty());
  EXPECT_NE(job->reason.find("previous attempt"), std::string::npos) << job->reason;
  // The gang runs again, whole, on two other nodes, once its old tasks have ended.
  Effects ended;
  for (const auto& m : fx.messages) {
    if (!m.message.has_stop()) continue;
    pb::TaskStatus st;
    st.set_task_id(m.message.stop().task_id());
    st.set_state(pb::TaskStatus::EXITED);
    st.set_signal(15);
    EXPECT_TRUE(state_->OnTaskStatus(m.node, st, now_, &ended).ok());
  }
  Effects cycle;
  state_->Schedule(now_, &cycle);
  job = state_->GetJob(id);
  ASSERT_EQ(job->task_views.size(), 2u);
  for (const auto& t : job->task_views) EXPECT_NE(t.node, victim);
}

TEST_F(HealthLoopTest, PcieDowngradeMakesTheGpuSuspectWithTheReason) {
  ValidateAll();
  pb::Heartbeat hb;
  for (int g = 0; g < 8; ++g) {
    pb::GpuTelemetry* t = hb.add_gpus();
    t->set_index(g);
    t->set_util_pct(50);
    t->set_pcie_gen(g == 5 ? 3 : 5);
    t->set_pcie_width(g == 5 ? 4 : 16);
    t->set_pcie_gen_max(5);
    t->set_pcie_width_max(16);
  }
  state_->OnHeartbeat("n-2", hb, now_);
  Tick();
  auto node = state_->GetNode("n-2");
  std::string all;
  for (const auto& c : node->conditions) all += c + "\n";
  EXPECT_NE(all.find("GPU 5 suspect"), std::string::npos) << all;
  EXPECT_NE(all.find("Gen5 x16"), std::string::npos) << all;
}

TEST_F(HealthLoopTest, SlowGpuFailsValidationAndGangsAvoidTheNode) {
  Effects fx;
  state_->EvaluateHealth(now_, &fx);
  for (int i = 1; i <= 3; ++i) Validate("n-" + std::to_string(i), Validation());
  Validate("n-4", Validation(700 * 0.7));  // GPU 3 at 0.7x the fleet median
  Tick();
  const auto slow = state_->GetNode("n-4");
  ASSERT_EQ(slow->conditions.size(), 1u);
  EXPECT_NE(slow->conditions[0].find("GPU 3 degraded"), std::string::npos) << slow->conditions[0];
  EXPECT_NE(slow->conditions[0].find("30.0% below the fleet median"), std::string::npos);
  // n-4 takes no new gangs: the first 2-node gang goes elsewhere, the second waits for a pair of
  // nodes rather than use n-4.
  const auto first = state_->GetJob(RunGang());
  ASSERT_EQ(first->task_views.size(), 2u) << first->reason;
  for (const auto& t : first->task_views) EXPECT_NE(t.node, "n-4");
  const auto second = state_->GetJob(RunGang());
  EXPECT_EQ(second->state, "pending");
  // A single-node job may still use it.
  Effects one;
  auto id = state_->Submit(*job::ParseJobSpec("name: one\ntasks: [{gpus: 8, command: [x]}]\n", "j"),
                           now_, &one);
  ASSERT_TRUE(id.ok());
  state_->Schedule(now_, &one);
  EXPECT_EQ(state_->GetJob(*id)->state, "starting");
}

TEST_F(HealthLoopTest, Xid13OnceIsNothingTwiceIsSuspect) {
  ValidateAll();
  pb::GpuEvent xid;
  xid.set_index(1);
  xid.set_kind("xid");
  xid.set_code(13);
  state_->OnGpuEvent("n-3", xid, now_);
  Tick();
  EXPECT_EQ(state_->GetNode("n-3")->state, "ready");
  EXPECT_TRUE(state_->GetNode("n-3")->conditions.empty());
  now_ += 2 * kHour;
  state_->OnGpuEvent("n-3", xid, now_);
  Tick();
  std::string all;
  const auto node = state_->GetNode("n-3");
  for (const auto& c : node->conditions) all += c + "\n";
  EXPECT_NE(all.find("GPU 1 suspect"), std::string::npos) << all;
}

// A node whose all-reduce is 30% below the fleet's (one slow GPU drags it down) comes into the
// pool degraded -- it takes single-node work, no gangs -- and is not asked to validate again and
// again.
TEST_F(HealthLoopTest, NodeSlowerThanTheFleetComesInDegradedAndIsNotAskedAgain) {
  Effects first;
  state_->EvaluateHealth(now_, &first);
  for (int i = 1; i <= 3; ++i) Validate("n-" + std::to_string(i), Validation());
  auto slow = nlohmann::json::parse(Validation(490));
  slow["nccl_busbw_gbs"] = 280.0;
  Validate("n-4", slow.dump());
  int asked = 0;
  for (int i = 0; i < 5; ++i) {
    for (const auto& m : Tick().messages) asked += m.message.has_validate();
  }
  EXPECT_EQ(asked, 0);
  EXPECT_EQ(state_->GetNode("n-4")->state, "degraded");
  EXPECT_EQ(state_->GetNode("n-1")->state, "ready");
}

// A validation that cannot run answers at once; the controller must not ask again in a loop.
TEST_F(HealthLoopTest, ValidationThatCannotRunIsNotAskedAgainInALoop) {
  Effects first;
  state_->EvaluateHealth(now_, &first);
  pb::ValidationResult broken;
  broken.set_ok(false);
  broken.set_json(R"({"error": "hangar-validate: no usable GPU"})");
  state_->OnValidation("n-1", broken, now_);
  int asked = 0;
  for (int i = 0; i < 5; ++i) {
    for (const auto& m : Tick().messages) asked += m.message.has_validate() && m.node == "n-1";
  }
  EXPECT_EQ(asked, 0);
  auto node = state_->GetNode("n-1");
  EXPECT_EQ(node->state, "pending_validation");
  bool shown = false;
  for (const auto& c : node->conditions) shown |= c.find("validation_error") != std::string::npos;
  EXPECT_TRUE(shown);
}

// A fatal fault on one GPU takes that GPU out, not the node; with nothing on it, it moves on to
// quarantine (it does not stay "draining" for ever).
TEST_F(HealthLoopTest, DoubleBitEccTakesTheGpuOutNotTheNodeAndQuarantinesIt) {
  ValidateAll();
  pb::GpuEvent dbe;
  dbe.set_index(1);
  dbe.set_kind("ecc_dbe");
  dbe.set_code(1);
  state_->OnGpuEvent("n-2", dbe, now_);
  Tick();
  Tick();
  auto node = state_->GetNode("n-2");
  EXPECT_EQ(node->state, "ready");
  EXPECT_EQ(node->gpus_free, 7);
  std::string all;
  for (const auto& c : node->conditions) all += c + "\n";
  EXPECT_NE(all.find("GPU 1 quarantined"), std::string::npos) << all;
}

// An operator's drain of a healthy node (routine maintenance) ends "drained", back with undrain;
// only a fault ends "quarantined", which waits for a remedy. The same drain with a fault open
// is quarantined.
TEST_F(HealthLoopTest, AnOperatorsDrainEndsDrainedNotQuarantined) {
  ValidateAll();
  Effects fx;
  ASSERT_TRUE(state_->Drain("n-3", "firmware update", now_, &fx).ok());
  for (int i = 0; i < 3; ++i) Tick();
  EXPECT_EQ(state_->GetNode("n-3")->state, "drained");
  ASSERT_TRUE(state_->Undrain("n-3", now_, &fx).ok());
  pb::GpuEvent xid;
  xid.set_index(2);
  xid.set_kind("xid");
  xid.set_code(79);
  ASSERT_TRUE(state_->Drain("n-2", "firmware update", now_, &fx).ok());
  state_->OnGpuEvent("n-2", xid, now_);
  for (int i = 0; i < 3; ++i) Tick();
  EXPECT_EQ(state_->GetNode("n-2")->state, "quarantined");
}

// Xid 79 quarantines the node until someone remediates it; a reboot recorded through the API
// sends it to validation, and a passing validation brings it back.
TEST_F(HealthLoopTest, RebootRecordedByTheOperatorBringsAQuarantinedNodeBackThroughValidation) {
  ValidateAll();
  pb::GpuEvent xid;
  xid.set_index(2);
  xid.set_kind("xid");
  xid.set_code(79);
  state_->OnGpuEvent("n-3", xid, now_);
  Tick();
  Tick();
  EXPECT_EQ(state_->GetNode("n-3")->state, "quarantined");
  for (int i = 0; i < 3; ++i) Tick();
  EXPECT_EQ(state_->GetNode("n-3")->state, "quarantined");  // it waits for a remedy, however long

  Effects fx;
  EXPECT_EQ(state_->Remediate("n-3", "gpu-reset", -1, "", now_, &fx).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(state_->Remediate("n-3", "reflash", -1, "", now_, &fx).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(state_->Remediate("n-9", "reboot", -1, "", now_, &fx).code(), StatusCode::kNotFound);
  ASSERT_TRUE(state_->Remediate("n-3", "reboot", -1, "rebooted by ops", now_, &fx).ok());
  int asked = 0;
  for (int i = 0; i < 2; ++i) {
    for (const auto& m : Tick().messages) asked += m.message.has_validate() && m.node == "n-3";
  }
  EXPECT_EQ(asked, 1);
  EXPECT_EQ(state_->GetNode("n-3")->state, "pending_validation");
  Validate("n-3", Validation());
  Tick();
  EXPECT_EQ(state_->GetNode("n-3")->state, "ready");
}

// An agent that registers with a new boot id says the node rebooted: for a quarantined node
// that is its remediation, and it comes back through validation; the same boot id is not.
TEST_F(HealthLoopTest, NodeThatRebootedComesBackThroughValidation) {
  ValidateAll();
  auto reregister = [&](const std::string& boot_id) {
    pb::Register r;
    r.mutable_inventory()->set_node("n-3");
    r.mutable_inventory()->set_boot_id(boot_id);
    for (int g = 0; g < 8; ++g)
      r.mutable_inventory()->add_gpus()->set_index(static_cast<uint32_t>(g));
    Effects fx;
    ASSERT_TRUE(state_->OnRegister(r, now_, &fx).ok());
  };
  reregister("boot-1");
  pb::GpuEvent xid;
  xid.set_index(2);
  xid.set_kind("xid");
  xid.set_code(79);
  state_->OnGpuEvent("n-3", xid, now_);
  for (int i = 0; i < 4; ++i) Tick();
  ASSERT_EQ(state_->GetNode("n-3")->state, "quarantined");
  reregister("boot-1");  // the agent restarted; the node did not
  for (int i = 0; i < 2; ++i) Tick();
  EXPECT_EQ(state_->GetNode("n-3")->state, "quarantined");
  reregister("boot-2");
  for (int i = 0; i < 2; ++i) Tick();
  EXPECT_EQ(state_->GetNode("n-3")->state, "pending_validation");
  Validate("n-3", Validation());
  Tick();
  EXPECT_EQ(state_->GetNode("n-3")->state, "ready");
}

}  // namespace
}  // namespace hangar::controller

// Undrain on a node health quarantined says what for, and points to the remedy that returns it.
namespace hangar::controller {
namespace {
TEST_F(HealthLoopTest, UndrainOnAQuarantinedNodePointsToRemediate) {
  ValidateAll();
  pb::GpuEvent xid;
  xid.set_index(2);
  xid.set_kind("xid");
  xid.set_code(79);
  state_->OnGpuEvent("n-3", xid, now_);
  Tick();
  Tick();
  ASSERT_EQ(state_->GetNode("n-3")->state, "quarantined");
  Effects fx;
  Status s = state_->Undrain("n-3", now_, &fx);
  EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(s.message().find("node 'n-3' is not drained by an operator: quarantined for "),
            std::string::npos)
      << s.message();
  EXPECT_NE(s.message().find("Xid 79"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("`hangar remediate n-3 --remedy reboot (or repair)`"),
            std::string::npos)
      << s.message();
  // A healthy node that was never drained is told only that.
  s = state_->Undrain("n-1", now_, &fx);
  EXPECT_EQ(
      s.message(),
      "node 'n-1' is not drained (it is ready); `hangar drain` and `hangar undrain` go together");
}
}  // namespace
}  // namespace hangar::controller
