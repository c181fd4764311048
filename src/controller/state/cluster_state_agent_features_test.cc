// Capabilities negotiated at registration (common/version.h): a newer controller sends an older
// agent nothing it would drop. A 0.1.0 agent names its version and no features; a job that needs
// a terminal is not placed on its node, a session or a step into its tasks and a maintenance
// command to it are refused with a sentence that names the version and says to upgrade it.
#include <gtest/gtest.h>

#include "common/version.h"
#include "controller/state/cluster_state.h"
#include "controller/state/state_test_util.h"

namespace hangar::controller {
namespace {

constexpr const char* kOldAgent = "hangar 0.1.0";  // the previous release: no features

using testing::Spec;

class AgentFeaturesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ControllerOptions o;
    o.require_validation = false;
    state_ = std::make_unique<ClusterState>(testing::TwoNodeTopology(), o,
                                            sched::Scheduler::Create({}).value());
  }
  // Registers `node` as an agent of `version` naming `features` (a 0.1.0 agent names none).
  Status Register(const std::string& node, const std::string& version, AgentFeatures features) {
    pb::Register r;
    r.mutable_inventory()->set_node(node);
    r.mutable_inventory()->set_agent_version(version);
    for (auto& f : AgentFeatureNames(features)) r.mutable_inventory()->add_features(std::move(f));
    for (int i = 0; i < 8; ++i) r.mutable_inventory()->add_gpus()->set_index(i);
    Effects fx;
    return state_->OnRegister(r, now_, &fx);
  }
  // Where the cycle at now_ launched tasks (node -> the Launch messages' tty flags).
  std::multimap<std::string, bool> Schedule() {
    Effects fx;
    state_->Schedule(now_, &fx);
    std::multimap<std::string, bool> out;
    for (const auto& m : fx.messages) {
      if (m.message.has_launch()) out.emplace(m.node, m.message.launch().tty());
    }
    now_ += kSecond;
    return out;
  }
  sched::JobId Submit(const std::string& yaml) {
    Effects fx;
    auto id = state_->Submit(Spec(yaml), now_, &fx);
    EXPECT_TRUE(id.ok()) << id.status().ToString();
    return id.ok() ? *id : 0;
  }

  std::unique_ptr<ClusterState> state_;
  Time now_ = kSecond;
};

constexpr const char* kTerminalJob =
    "name: shell\nterminal: true\ntasks:\n  - {gpus: 8, command: [bash]}\n";

TEST_F(AgentFeaturesTest, ATerminalJobGoesOnlyToANodeWhoseAgentCanGiveItOne) {
  ASSERT_TRUE(Register("a", kOldAgent, 0).ok());
  ASSERT_TRUE(Register("b", "hangar " + std::string(Version()), kEveryAgentFeature).ok());
  Submit(kTerminalJob);
  const auto launched = Schedule();
  ASSERT_EQ(launched.size(), 1u);
  EXPECT_EQ(launched.begin()->first, "b");
  EXPECT_TRUE(launched.begin()->second);  // under a terminal
}

TEST_F(AgentFeaturesTest, WithOnlyOlderAgentsItWaitsAndSaysWhyThenRunsOnceOneIsUpgraded) {
  ASSERT_TRUE(Register("a", kOldAgent, 0).ok());
  ASSERT_TRUE(Register("b", kOldAgent, 0).ok());
  const sched::JobId shell = Submit(kTerminalJob);
  const sched::JobId batch = Submit("name: batch\ntasks:\n  - {gpus: 8, command: [train]}\n");
  const auto launched = Schedule();
  ASSERT_EQ(launched.size(), 1u);  // the batch job: an older agent runs it as before
  EXPECT_FALSE(launched.begin()->second);
  EXPECT_EQ(state_->GetJob(batch)->state, "starting");

  auto job = state_->GetJob(shell);
  ASSERT_TRUE(job.ok());
  EXPECT_EQ(job->state, "pending");
  EXPECT_EQ(job->reason_rule, "agent-version");
  // Explained when the cycle looked at it, before the batch job took a node: both had room.
  EXPECT_EQ(job->reason,
            "needs a terminal or an open stdin, which the agents of 2 nodes with room for it "
            "cannot give (they run an older hangar: upgrade them, docs/operations.md); the other "
            "nodes fit 0 of its 1 replicas");

  // The free node's agent is upgraded (it restarts and registers again): the job starts there.
  const std::string free_node = launched.begin()->first == "a" ? "b" : "a";
  ASSERT_TRUE(Register(free_node, "hangar " + std::string(Version()), kEveryAgentFeature).ok());
  const auto after = Schedule();
  ASSERT_EQ(after.size(), 1u);
  EXPECT_EQ(after.begin()->first, free_node);
  EXPECT_TRUE(after.begin()->second);
}

TEST_F(AgentFeaturesTest, SessionsAndMaintenanceCommandsAreRefusedForAnOlderAgent) {
  ASSERT_TRUE(Register("a", kOldAgent, 0).ok());
  ASSERT_TRUE(Register("b", "hangar " + std::string(Version()), kEveryAgentFeature).ok());
  EXPECT_TRUE(state_->AgentCan("b", AgentFeature::kSessions).ok());
  Status s = state_->AgentCan("a", AgentFeature::kSessions);
  EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(s.message(),
            "a's agent runs hangar 0.1.0, which cannot open sessions into tasks (exec, attach, "
            "port-forward, srun steps); upgrade its agent to hangar " +
                std::string(Version()) + " (docs/operations.md, \"Versions and upgrades\")");

  // `hangar maintain` refuses before it drains anything.
  Effects fx;
  const Principal admin{"ops", Role::kAdmin};
  auto run = state_->StartMaintenance(
      admin, {{"nodes", "a,b"}, {"batch", 1}, {"run", "/opt/fw.sh"}}, now_, &fx);
  ASSERT_FALSE(run.ok());
  EXPECT_NE(run.status().message().find("a's agent runs hangar 0.1.0, which cannot run "
                                        "maintenance commands"),
            std::string::npos)
      << run.status().message();
  EXPECT_NE(run.status().message().find("or leave a out of --nodes"), std::string::npos);
  EXPECT_TRUE(fx.messages.empty());
  EXPECT_EQ(state_->GetNode("a")->state, "ready");  // not drained

  // The node says so where operators look (`hangar nodes`, the dashboard).
  const auto conditions = state_->GetNode("a")->conditions;
  ASSERT_EQ(conditions.size(), 4u);
  EXPECT_EQ(conditions[0].rfind("AgentOutdated: a's agent runs hangar 0.1.0, which cannot run a "
                                "task under a terminal",
                                0),
            0u)
      << conditions[0];
  EXPECT_TRUE(state_->GetNode("b")->conditions.empty());
}

// An agent of the round before steps in containers opens sessions but would run a step of
// `srun --container-image` on the host: such a step is refused on its node, naming it.
TEST_F(AgentFeaturesTest, AStepInAContainerNeedsAnAgentThatCanRunOne) {
  const AgentFeatures before = Bit(AgentFeature::kTerminals) | Bit(AgentFeature::kSessions) |
                               Bit(AgentFeature::kMaintenance);
  ASSERT_TRUE(Register("a", "hangar 0.2.0", before).ok());
  EXPECT_TRUE(state_->AgentCan("a", AgentFeature::kSessions).ok());
  Status s = state_->AgentCan("a", AgentFeature::kContainerSteps);
  EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(s.message().rfind("a's agent runs hangar 0.2.0, which cannot run a step in a "
                              "container (srun --container-image); upgrade its agent",
                              0),
            0u)
      << s.message();
}

TEST_F(AgentFeaturesTest, AnAgentThatNamesNoVersionCanDoEverything) {
  // Simulated agents (hangar swarm) and older tests name no version.
  ASSERT_TRUE(Register("a", "", 0).ok());
  EXPECT_TRUE(state_->AgentCan("a", AgentFeature::kTerminals).ok());
  EXPECT_TRUE(state_->AgentCan("a", AgentFeature::kMaintenance).ok());
  Submit(kTerminalJob);
  EXPECT_EQ(Schedule().count("a"), 1u);
}

}  // namespace
}  // namespace hangar::controller
