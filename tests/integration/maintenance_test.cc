// Rolling maintenance end to end (docs/maintenance.md): a real controller and sixteen real agents
// with fake GPUs on loopback, started with --allow-maintenance-commands. `hangar maintain` walks
// them four at a time while a checkpointing job runs: the job gets its checkpoint signal when its
// node's batch drains, is requeued and resumes from its checkpoint elsewhere. The controller is
// killed midway, in the second batch, and started again: the run resumes from the store and no
// node runs its command twice. The run stops at node-11, whose command fails, naming it and why;
// the last batch is never touched.
#include <gtest/gtest.h>
#include <signal.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>

#include "local_cluster.h"
#include "train_script.h"

namespace hangar::testing {
namespace {

namespace fs = std::filesystem;

constexpr const char* kCluster = R"(
name: maint
node_defaults: {gpus: 2, gpu_model: H100-SXM-80GB, gpu_memory: 80Gi, cpu: 16, memory: 128Gi}
fabric:
  spines:
    - name: spine-0
      leaves:
        - {name: leaf-0, nodes: [{name: "node-[1-4]"}]}
        - {name: leaf-1, nodes: [{name: "node-[5-8]"}]}
        - {name: leaf-2, nodes: [{name: "node-[9-12]"}]}
        - {name: leaf-3, nodes: [{name: "node-[13-16]"}]}
)";

std::vector<std::string> Nodes() {
  std::vector<std::string> out;
  for (int i = 1; i <= 16; ++i) out.push_back("node-" + std::to_string(i));
  return out;
}

class MaintenanceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    cluster_ = std::make_unique<LocalCluster>(kCluster);
    cluster_->StartController();
    for (const auto& n : Nodes()) cluster_->StartAgent(n, {"--allow-maintenance-commands"});
    ASSERT_TRUE(cluster_->WaitForNodesReady(Nodes(), 60 * kSecond))
        << cluster_->Get("/v1/nodes").dump(2);
    fs::create_directories(Out());
  }
  std::string Out() { return cluster_->dir() + "/out"; }
  nlohmann::json Run() { return cluster_->Get("/v1/maintenance/1"); }
  std::map<std::string, std::string> Steps() {
    std::map<std::string, std::string> out;
    auto r = Run();
    if (!r.is_object() || !r.contains("nodes")) return out;
    for (const auto& n : r["nodes"]) out[n.value("node", "")] = n.value("step", "");
    return out;
  }
  std::unique_ptr<LocalCluster> cluster_;
};

TEST_F(MaintenanceTest, SixteenNodesInBatchesOfFourAJobCheckpointsAndResumesARestartAndAFailure) {
  const std::string script = cluster_->dir() + "/train.sh";
  std::ofstream(script) << TrainScript(Out());
  int status = 0;
  auto job = cluster_->Post("/v1/jobs",
                            "name: train\ncheckpoint: {signal: SIGUSR1, grace: 120s}\ntasks:\n"
                            "  - gpus: 1\n    command: [\"/bin/sh\", \"" +
                                script + "\"]\n",
                            &status);
  ASSERT_EQ(status, 201) << job.dump();
  const uint64_t id = job.value("id", uint64_t{0});
  ASSERT_TRUE(cluster_->WaitForJobState(id, "running", 20 * kSecond)) << cluster_->Job(id).dump(2);
  ASSERT_TRUE(LocalCluster::WaitFor(
      [&] { return std::atoi(ReadFile(Out() + "/step").c_str()) >= 3; }, 20 * kSecond));

  // Each node's command notes itself and takes a moment; node-11's fails, late enough that the
  // rest of its batch (the job's node among them, maybe) has drained and run by then.
  const std::string command = "echo \"$HANGAR_NODE\" >> " + Out() +
                              "/commands; echo \"updating $HANGAR_NODE\"; sleep 1; "
                              "if [ \"$HANGAR_NODE\" = node-11 ]; then sleep 4; echo 'firmware "
                              "image rejected' >&2; exit 7; fi";
  auto run = cluster_->Post(
      "/v1/maintenance",
      nlohmann::json{{"nodes", "all"}, {"batch", 4}, {"run", command}, {"timeout", "2m"}}.dump(),
      &status);
  ASSERT_EQ(status, 201) << run.dump(2);
  EXPECT_EQ(run.value("batches", 0), 4);

  // Midway, in the second batch with its commands under way, the controller dies and comes back.
  ASSERT_TRUE(LocalCluster::WaitFor(
      [&] {
        auto s = Steps();
        return s["node-5"] == "running" || s["node-6"] == "running" || s["node-7"] == "running" ||
               s["node-8"] == "running";
      },
      90 * kSecond))
      << Run().dump(2);
  cluster_->KillController(SIGKILL);
  cluster_->StartController();

  ASSERT_TRUE(
      LocalCluster::WaitFor([&] { return Run().value("state", "") == "failed"; }, 120 * kSecond))
      << Run().dump(2);
  const nlohmann::json done = Run();
  EXPECT_EQ(done.value("failure", ""),
            "node-11: its command exited with status 7 (last line: firmware image rejected)");
  auto steps = Steps();
  for (int i = 1; i <= 16; ++i) {
    const std::string n = "node-" + std::to_string(i);
    const std::string want = i == 11 ? "failed" : i <= 12 ? "done" : "waiting";
    EXPECT_EQ(steps[n], want) << n << "\n" << done.dump(2);
  }
  for (const auto& n : done["nodes"]) {
    if (n.value("node", "") == "node-11") {
      EXPECT_EQ(n.value("output", ""), "updating node-11\nfirmware image rejected\n");
    }
  }
  // Every node of the first three batches ran its command once, the restart notwithstanding; the
  // last batch's never ran.
  auto ran = Lines(ReadFile(Out() + "/commands"));
  std::sort(ran.begin(), ran.end());
  std::vector<std::string> want;
  for (int i = 1; i <= 12; ++i) want.push_back("node-" + std::to_string(i));
  std::sort(want.begin(), want.end());
  EXPECT_EQ(ran, want);
  // node-11 stays out of service for its operator; the others are back, validated.
  EXPECT_EQ(cluster_->Get("/v1/nodes/node-11").value("state", ""), "drained");
  std::vector<std::string> back = Nodes();
  back.erase(std::find(back.begin(), back.end(), "node-11"));
  EXPECT_TRUE(cluster_->WaitForNodesReady(back, 30 * kSecond))
      << cluster_->Get("/v1/nodes").dump(2);

  // The job was checkpointed when its node's batch drained, and resumed from it elsewhere: never
  // failed, never started from scratch again.
  ASSERT_TRUE(cluster_->WaitForJobState(id, "running", 30 * kSecond)) << cluster_->Job(id).dump(2);
  auto runs = Lines(ReadFile(Out() + "/runs"));
  ASSERT_GE(runs.size(), 2u) << ReadFile(Out() + "/runs");
  EXPECT_FALSE(ReadFile(Out() + "/checkpoints").empty());
  for (size_t r = 1; r < runs.size(); ++r) {
    EXPECT_GE(std::atoi(ReadFile(Out() + "/resumed." + std::to_string(r)).c_str()), 3)
        << "run " << r << " did not resume from its checkpoint: " << ReadFile(Out() + "/runs");
  }
  status = 0;
  cluster_->Post("/v1/jobs/" + std::to_string(id) + "/cancel", "", &status);
  EXPECT_TRUE(cluster_->WaitForJobState(id, "cancelled", 30 * kSecond));
}

// An agent started without --allow-maintenance-commands refuses, and the run stops there.
TEST_F(MaintenanceTest, AnAgentWithoutTheOptionRefusesAndTheRunStopsThere) {
  cluster_->KillAgent("node-2", SIGTERM);
  cluster_->StartAgent("node-2");
  ASSERT_TRUE(cluster_->WaitForNodesReady({"node-2"}, 30 * kSecond));
  int status = 0;
  cluster_->Post("/v1/maintenance",
                 R"({"nodes": "node-[1-4]", "batch": 2, "run": "touch )" + Out() + R"(/ran"})",
                 &status);
  ASSERT_EQ(status, 201);
  ASSERT_TRUE(
      LocalCluster::WaitFor([&] { return Run().value("state", "") == "failed"; }, 60 * kSecond))
      << Run().dump(2);
  EXPECT_EQ(Run().value("failure", ""),
            "node-2: the agent of node-2 runs no maintenance commands: start it with "
            "--allow-maintenance-commands to let `hangar maintain` run commands there");
  auto steps = Steps();
  EXPECT_EQ(steps["node-1"], "done");
  EXPECT_EQ(steps["node-3"], "waiting");
}

}  // namespace
}  // namespace hangar::testing
