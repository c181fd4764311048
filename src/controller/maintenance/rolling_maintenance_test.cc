#include "controller/maintenance/rolling_maintenance.h"

#include <gtest/gtest.h>

#include "cluster/cluster_yaml.h"

namespace hangar::controller::maintenance {
namespace {

// Six nodes under two leaves; each node's facts are what the test says they are.
class RollingMaintenanceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto f = cluster::ParseClusterYaml(
        "node_defaults: {gpus: 8, gpu_model: H100, gpu_memory: 80Gi, cpu: 64, memory: 512Gi}\n"
        "fabric:\n"
        "  spines:\n"
        "    - name: spine-0\n"
        "      leaves:\n"
        "        - {name: leaf-0, nodes: [{name: \"n-[1-3]\"}]}\n"
        "        - {name: leaf-1, nodes: [{name: \"n-[4-6]\"}]}\n",
        "c.yaml");
    ASSERT_TRUE(f.ok()) << f.status().ToString();
    topo_ = f->topology;
    for (int i = 1; i <= 6; ++i) {
      NodeFacts& nf = facts_["n-" + std::to_string(i)];
      nf.connected = nf.ready = true;
    }
  }

  Actions Advance() {
    Actions a = book_.Advance([this](const std::string& n) { return facts_.at(n); }, now_);
    // The controller carries the drains and undrains out.
    for (const auto& n : a.drain) {
      facts_[n].drained = true;
      facts_[n].ready = false;
    }
    for (const auto& n : a.undrain) facts_[n].drained = false;
    return a;
  }

  const maintenance::Run& Start(const std::string& body) {
    auto r = ParseRequest(nlohmann::json::parse(body), *topo_);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    auto started = book_.Start(*r, now_);
    EXPECT_TRUE(started.ok()) << started.status().ToString();
    return **started;
  }

  Step StepOf(const std::string& node) const {
    for (const auto& n : book_.Active() ? book_.Active()->nodes : book_.Latest()->nodes) {
      if (n.node == node) return n.step;
    }
    return Step::kWaiting;
  }

  // The node's command succeeds, and its validation passes.
  void CommandAndValidationPass(const maintenance::Run& r, const std::string& node) {
    auto a = book_.OnOutcome(node, r.CommandId(node), {}, now_);
    ASSERT_TRUE(a.ok()) << a.status().ToString();
    ASSERT_EQ(a->undrain, std::vector<std::string>{node});
    facts_[node].drained = false;
    book_.NoteValidation(node);
    facts_[node].ready = true;
  }

  std::shared_ptr<const cluster::Topology> topo_;
  std::map<std::string, NodeFacts> facts_;
  RollingMaintenance book_;
  Time now_ = 1'000'000;
};

TEST_F(RollingMaintenanceTest, SelectorsNameHostListsSwitchesOrAll) {
  auto names = [&](const std::string& sel) {
    auto r = ParseRequest({{"nodes", sel}, {"batch", 2}, {"run", "true"}}, *topo_);
    std::vector<std::string> out;
    if (r.ok()) {
      for (const auto& n : r->nodes) out.push_back(n.node + "@" + std::to_string(n.batch));
    }
    return out;
  };
  EXPECT_EQ(names("n-[5-6],n-1"), (std::vector<std::string>{"n-1@0", "n-5@0", "n-6@1"}));
  EXPECT_EQ(names("leaf-1"), (std::vector<std::string>{"n-4@0", "n-5@0", "n-6@1"}));
  EXPECT_EQ(names("all").size(), 6u);
  auto bad = ParseRequest({{"nodes", "n-9"}, {"batch", 2}, {"run", "true"}}, *topo_);
  EXPECT_EQ(bad.status().code(), StatusCode::kNotFound);
  EXPECT_NE(bad.status().message().find("'n-9' is not in this cluster"), std::string::npos);
  auto no_batch = ParseRequest({{"nodes", "all"}, {"batch", 0}, {"run", "true"}}, *topo_);
  EXPECT_EQ(no_batch.status().code(), StatusCode::kInvalidArgument);
}

TEST_F(RollingMaintenanceTest, WalksBatchesDrainRunValidateReturn) {
  const maintenance::Run& r = Start(R"({"nodes": "n-[1-4]", "batch": 2, "run": "/opt/fw.sh"})");
  facts_["n-1"].has_work = true;  // a job still runs there
  Actions a = Advance();
  EXPECT_EQ(a.drain, (std::vector<std::string>{"n-1", "n-2"}));
  EXPECT_EQ(a.send, std::vector<std::string>{"n-2"});  // n-1 still holds work
  EXPECT_EQ(StepOf("n-1"), Step::kDraining);
  EXPECT_EQ(StepOf("n-3"), Step::kWaiting);
  facts_["n-1"].has_work = false;  // the job checkpointed and was requeued elsewhere
  a = Advance();
  EXPECT_EQ(a.send, std::vector<std::string>{"n-1"});
  CommandAndValidationPass(r, "n-1");
  // Back from the command but not yet validated: the batch waits for it.
  ASSERT_TRUE(book_.OnOutcome("n-2", r.CommandId("n-2"), {}, now_).ok());
  facts_["n-2"].drained = false;
  a = Advance();
  EXPECT_EQ(StepOf("n-1"), Step::kDone);
  EXPECT_EQ(StepOf("n-2"), Step::kValidating);
  EXPECT_TRUE(a.drain.empty());
  book_.NoteValidation("n-2");
  facts_["n-2"].ready = true;
  a = Advance();
  EXPECT_EQ(StepOf("n-2"), Step::kDone);
  EXPECT_EQ(a.drain, (std::vector<std::string>{"n-3", "n-4"}));  // the next batch, in this pass
  EXPECT_EQ(book_.Active()->batch, 1);
  Advance();
  CommandAndValidationPass(r, "n-3");
  CommandAndValidationPass(r, "n-4");
  Advance();
  EXPECT_EQ(book_.Latest()->state, RunState::kSucceeded);
  EXPECT_EQ(book_.Active(), nullptr);
}

TEST_F(RollingMaintenanceTest, StopsAtTheFirstFailureNamingTheNodeAndWhy) {
  const maintenance::Run& r = Start(R"({"nodes": "n-[1-6]", "batch": 3, "run": "/opt/fw.sh"})");
  facts_["n-3"].has_work = true;
  Advance();
  CommandOutcome bad;
  bad.exit_code = 3;
  bad.output = "flashing...\nERROR: image does not match board\n";
  ASSERT_TRUE(book_.OnOutcome("n-2", r.CommandId("n-2"), bad, now_).ok());
  EXPECT_EQ(book_.Active()->state, RunState::kStopping);
  // n-1's command still runs and finishes; n-3 never got to its command: it goes back as it came.
  CommandAndValidationPass(r, "n-1");
  Actions a = Advance();
  EXPECT_EQ(a.undrain, std::vector<std::string>{"n-3"});
  EXPECT_EQ(StepOf("n-3"), Step::kSkipped);
  EXPECT_EQ(StepOf("n-1"), Step::kDone);
  const maintenance::Run& done = *book_.Latest();
  EXPECT_EQ(done.state, RunState::kFailed);
  EXPECT_EQ(done.failure,
            "n-2: its command exited with status 3 (last line: ERROR: image does not match board)");
  EXPECT_EQ(StepOf("n-4"), Step::kWaiting);  // the next batch never started
  EXPECT_TRUE(facts_["n-2"].drained);        // the failed node stays out of service
  EXPECT_FALSE(facts_["n-4"].drained);
  EXPECT_EQ(book_.Active(), nullptr);
}

TEST_F(RollingMaintenanceTest, AnAgentThatRefusesStopsTheRunThere) {
  const maintenance::Run& r = Start(R"({"nodes": "n-1", "batch": 1, "run": "reboot"})");
  Advance();
  CommandOutcome refused;
  refused.refused = true;
  refused.error =
      "the agent of n-1 runs no maintenance commands: start it with "
      "--allow-maintenance-commands";
  ASSERT_TRUE(book_.OnOutcome("n-1", r.CommandId("n-1"), refused, now_).ok());
  EXPECT_EQ(book_.Latest()->state, RunState::kFailed);
  EXPECT_EQ(book_.Latest()->failure, "n-1: " + refused.error);
}

TEST_F(RollingMaintenanceTest, AValidationThatFailsAfterTheCommandFailsTheRun) {
  const maintenance::Run& r = Start(R"({"nodes": "n-1", "batch": 1, "run": "true"})");
  Advance();
  ASSERT_TRUE(book_.OnOutcome("n-1", r.CommandId("n-1"), {}, now_).ok());
  facts_["n-1"].unfit = "it is quarantined for a slow GPU";  // before its validation: not judged
  Advance();
  EXPECT_EQ(StepOf("n-1"), Step::kValidating);
  book_.NoteValidation("n-1");
  Advance();
  EXPECT_EQ(book_.Latest()->state, RunState::kFailed);
  EXPECT_EQ(book_.Latest()->failure,
            "n-1: its validation after the command failed: it is quarantined for a slow GPU");
}

// A node whose agent never answers (it went away while its command ran) fails the run once the
// command's timeout and the return timeout have passed, instead of holding it for ever.
TEST_F(RollingMaintenanceTest, ANodeWhoseAgentNeverAnswersFailsAfterTheTimeouts) {
  Start(R"({"nodes": "n-1", "batch": 1, "run": "fw", "timeout": "10m", "return_timeout": "5m"})");
  Advance();
  ASSERT_EQ(StepOf("n-1"), Step::kRunning);
  facts_["n-1"].connected = false;
  now_ += 15 * kMinute - kSecond;
  Advance();
  EXPECT_EQ(StepOf("n-1"), Step::kRunning);
  now_ += kSecond;
  Advance();
  EXPECT_EQ(book_.Latest()->state, RunState::kFailed);
  EXPECT_EQ(book_.Latest()->failure.rfind("n-1: its agent did not answer within 15m", 0), 0u)
      << book_.Latest()->failure;
  EXPECT_NE(book_.Latest()->failure.find("the agent is not connected"), std::string::npos);
}

// A node that never comes back after its command (it rebooted into a broken firmware) fails the
// run after the return timeout; the stored run keeps the setting.
TEST_F(RollingMaintenanceTest, ANodeThatNeverComesBackAfterItsCommandFailsTheRun) {
  const maintenance::Run& r =
      Start(R"({"nodes": "n-[1-2]", "batch": 1, "run": "fw", "return_timeout": "20m"})");
  EXPECT_EQ(FromJson(ToJson(r))->return_timeout, 20 * kMinute);
  Advance();
  ASSERT_TRUE(book_.OnOutcome("n-1", r.CommandId("n-1"), {}, now_).ok());
  facts_["n-1"].connected = facts_["n-1"].ready = false;
  now_ += 20 * kMinute - kSecond;
  Advance();
  EXPECT_EQ(StepOf("n-1"), Step::kValidating);
  now_ += kSecond;
  Advance();
  EXPECT_EQ(book_.Latest()->state, RunState::kFailed);
  EXPECT_EQ(book_.Latest()->failure,
            "n-1: it did not come back validated and ready within 20m of its command's end (its "
            "agent has not reconnected); look at the node: it takes no work until it passes "
            "validation");
  EXPECT_EQ(StepOf("n-2"), Step::kWaiting);  // the next batch never started
  EXPECT_FALSE(
      ParseRequest(nlohmann::json::parse(
                       R"({"nodes": "n-1", "batch": 1, "run": "x", "return_timeout": "0s"})"),
                   *topo_)
          .ok());
}

TEST_F(RollingMaintenanceTest, OnlyTheNodeAskedMayAnswerAndOnlyOnce) {
  const maintenance::Run& r = Start(R"({"nodes": "n-[1-2]", "batch": 2, "run": "true"})");
  Advance();
  // Another node answering for n-1, an id of another run: refused, nothing changes.
  EXPECT_EQ(book_.OnOutcome("n-2", r.CommandId("n-1"), {}, now_).status().code(),
            StatusCode::kNotFound);
  EXPECT_EQ(book_.OnOutcome("n-1", "99/n-1", {}, now_).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(StepOf("n-1"), Step::kRunning);
  ASSERT_TRUE(book_.OnOutcome("n-1", r.CommandId("n-1"), {}, now_).ok());
  EXPECT_FALSE(book_.OnOutcome("n-1", r.CommandId("n-1"), {}, now_).ok());  // sent again
}

TEST_F(RollingMaintenanceTest, OneRunAtATimeAndCancelLeavesNodesAsTheyAre) {
  const maintenance::Run& r = Start(R"({"nodes": "n-[1-2]", "batch": 1, "run": "true"})");
  Advance();
  auto second =
      book_.Start(*ParseRequest({{"nodes", "n-3"}, {"batch", 1}, {"run", "true"}}, *topo_), now_);
  EXPECT_EQ(second.status().code(), StatusCode::kFailedPrecondition);
  auto a = book_.Cancel(r.id, "ops (admin)", now_);
  ASSERT_TRUE(a.ok());
  EXPECT_TRUE(a->undrain.empty());
  EXPECT_EQ(book_.Latest()->state, RunState::kCancelled);
  EXPECT_TRUE(
      book_.Start(*ParseRequest({{"nodes", "n-3"}, {"batch", 1}, {"run", "true"}}, *topo_), now_)
          .ok());
}

// A controller restart: the stored run resumes where it was, and a command still running is sent
// again at once (its agent answers an id it ran with the outcome it kept).
TEST_F(RollingMaintenanceTest, AStoredRunResumesAndSendsItsRunningCommandsAgain) {
  const maintenance::Run& r = Start(R"({"nodes": "n-[1-4]", "batch": 2, "run": "true"})");
  Advance();
  CommandAndValidationPass(r, "n-1");
  const nlohmann::json stored = ToJson(r);

  RollingMaintenance restarted;
  auto back = FromJson(nlohmann::json::parse(stored.dump()));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  restarted.Restore(*back);
  Actions a = restarted.Advance([this](const std::string& n) { return facts_.at(n); }, now_);
  EXPECT_EQ(a.send, std::vector<std::string>{"n-2"});
  EXPECT_TRUE(a.drain.empty());
  ASSERT_TRUE(restarted.OnOutcome("n-2", r.CommandId("n-2"), {}, now_).ok());
  facts_["n-2"].drained = false;
  facts_["n-2"].ready = true;
  restarted.NoteValidation("n-2");
  a = restarted.Advance([this](const std::string& n) { return facts_.at(n); }, now_);
  EXPECT_EQ(a.drain, (std::vector<std::string>{"n-3", "n-4"}));
  EXPECT_EQ(restarted.Active()->nodes[0].step, Step::kDone);
  // The next run does not reuse a stored id.
  ASSERT_TRUE(restarted.Cancel(r.id, "ops", now_).ok());
  auto next =
      restarted.Start(*ParseRequest({{"nodes", "n-5"}, {"batch", 1}, {"run", "x"}}, *topo_), now_);
  ASSERT_TRUE(next.ok());
  EXPECT_EQ((*next)->id, r.id + 1);
}

}  // namespace
}  // namespace hangar::controller::maintenance
