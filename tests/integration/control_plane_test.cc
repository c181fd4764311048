// End to end on loopback: a controller and four agents as real processes, jobs as real processes.
#include <gtest/gtest.h>
#include <signal.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <thread>

#include "local_cluster.h"

namespace hangar::testing {
namespace {

namespace fs = std::filesystem;

const std::string kCluster = FourNodeTwoLeafCluster("it");
const std::vector<std::string>& kNodes = kFourNodes;

std::map<std::string, std::string> ReadEnv(const std::string& path) {
  std::map<std::string, std::string> env;
  std::istringstream in(ReadFile(path));
  for (std::string line; std::getline(in, line);) {
    auto eq = line.find('=');
    if (eq != std::string::npos) env[line.substr(0, eq)] = line.substr(eq + 1);
  }
  return env;
}

class ControlPlaneTest : public ::testing::Test {
 protected:
  void SetUp() override {
    cluster_ = std::make_unique<LocalCluster>(kCluster);
    cluster_->StartController();
    cluster_->StartAllAgents(kNodes);
    ASSERT_TRUE(cluster_->WaitForAgents(4)) << "agents did not register; see " << cluster_->dir();
  }
  uint64_t Submit(const std::string& yaml) {
    int status = 0;
    auto r = cluster_->Post("/v1/jobs", yaml, &status);
    EXPECT_EQ(status, 201) << r.dump();
    return r.value("id", uint64_t{0});
  }
  std::string Out() { return cluster_->dir() + "/out"; }
  std::unique_ptr<LocalCluster> cluster_;
};

TEST_F(ControlPlaneTest, TwoNodeGangStartsWithRanksAndOneMaster) {
  fs::create_directories(Out());
  uint64_t id = Submit(
      "name: gang\ntasks:\n  - replicas: 2\n    gpus: 8\n    command: [\"/bin/sh\", \"-c\", \"env "
      "> " +
      Out() + "/env.$RANK\"]\n");
  ASSERT_TRUE(cluster_->WaitForJobState(id, "succeeded", 20 * kSecond))
      << cluster_->Job(id).dump(2);
  auto e0 = ReadEnv(Out() + "/env.0"), e1 = ReadEnv(Out() + "/env.1");
  EXPECT_EQ(e0["RANK"], "0");
  EXPECT_EQ(e1["RANK"], "1");
  EXPECT_EQ(e0["WORLD_SIZE"], "2");
  EXPECT_EQ(e1["WORLD_SIZE"], "2");
  EXPECT_EQ(e0["MASTER_ADDR"], e1["MASTER_ADDR"]);
  EXPECT_EQ(e0["MASTER_PORT"], e1["MASTER_PORT"]);
  EXPECT_FALSE(e0["MASTER_PORT"].empty());
  EXPECT_EQ(e0["NODE_RANK"], "0");
  EXPECT_EQ(e1["NODE_RANK"], "1");
  EXPECT_EQ(e0["LOCAL_RANK"], "0");
  EXPECT_EQ(e1["LOCAL_WORLD_SIZE"], "1");
  EXPECT_EQ(e0["CUDA_VISIBLE_DEVICES"], "0,1,2,3,4,5,6,7");
  EXPECT_EQ(e0["HANGAR_JOB_ID"], std::to_string(id));
  EXPECT_EQ(e1["HANGAR_TASK_INDEX"], "1");
  auto job = cluster_->Job(id);
  std::set<std::string> nodes;
  for (const auto& t : job["task_list"]) nodes.insert(t["node"].get<std::string>());
  EXPECT_EQ(nodes.size(), 2u);
  // The logs come back through the controller from the agents.
  EXPECT_NE(cluster_->GetText("/v1/jobs/" + std::to_string(id) + "/logs?task=0").size(), 1u);
}

TEST_F(ControlPlaneTest, CancelStopsEveryTask) {
  fs::create_directories(Out());
  uint64_t id = Submit(
      "name: sleeper\ntasks:\n  - replicas: 2\n    gpus: 8\n    command: [\"/bin/sh\", \"-c\", "
      "\"echo $$ > " +
      Out() + "/pid.$RANK; exec sleep 1000\"]\n");
  ASSERT_TRUE(cluster_->WaitForJobState(id, "running", 20 * kSecond));
  ASSERT_TRUE(LocalCluster::WaitFor(
      [&] { return fs::exists(Out() + "/pid.0") && fs::exists(Out() + "/pid.1"); }, 5 * kSecond));
  const int p0 = std::stoi(ReadFile(Out() + "/pid.0")), p1 = std::stoi(ReadFile(Out() + "/pid.1"));
  int status = 0;
  cluster_->Post("/v1/jobs/" + std::to_string(id) + "/cancel", "", &status);
  EXPECT_EQ(status, 200);
  EXPECT_EQ(cluster_->Job(id)["state"], "cancelled");
  EXPECT_TRUE(
      LocalCluster::WaitFor([&] { return kill(p0, 0) != 0 && kill(p1, 0) != 0; }, 15 * kSecond))
      << "tasks still running after cancel";
  // Their GPUs come back.
  EXPECT_TRUE(LocalCluster::WaitFor(
      [&] {
        auto nodes = cluster_->Get("/v1/nodes");
        double free = 0;
        for (const auto& n : nodes["nodes"]) free += n["gpus_free"].get<double>();
        return free == 32;
      },
      10 * kSecond));
}

TEST_F(ControlPlaneTest, ControllerKilledMidRunRestartsAndTheJobFinishesOnce) {
  fs::create_directories(Out());
  // Each run of a task appends a line: a duplicate launch would show as a second line.
  uint64_t id = Submit(
      "name: survivor\ntasks:\n  - replicas: 2\n    gpus: 8\n    command: [\"/bin/sh\", \"-c\", "
      "\"echo run >> " +
      Out() + "/runs.$RANK; sleep 4\"]\n");
  ASSERT_TRUE(cluster_->WaitForJobState(id, "running", 20 * kSecond));
  cluster_->KillController(SIGKILL);
  std::this_thread::sleep_for(std::chrono::milliseconds(1000));
  cluster_->StartController();
  ASSERT_TRUE(cluster_->WaitForJobState(id, "succeeded", 30 * kSecond))
      << cluster_->Job(id).dump(2);
  EXPECT_EQ(ReadFile(Out() + "/runs.0"), "run\n");
  EXPECT_EQ(ReadFile(Out() + "/runs.1"), "run\n");
  auto jobs = cluster_->Get("/v1/jobs");
  EXPECT_EQ(jobs["jobs"].size(), 1u);
  EXPECT_EQ(cluster_->Job(id)["attempt"], 0);
}

// An agent killed and started again at once (a crash, an upgrade) adopts its running task; when
// the task then ends by itself its job succeeds -- once, its attempt unchanged. Before adopted
// tasks' statuses came from the kernel (exit_watcher.h) the end was "unknown" and the job failed.
TEST_F(ControlPlaneTest, AnAgentRestartedUnderARunningGangAdoptsItsTaskAndTheJobSucceeds) {
  fs::create_directories(Out());
  uint64_t id = Submit(
      "name: adopted\ntasks:\n  - replicas: 2\n    gpus: 8\n    command: [\"/bin/sh\", \"-c\", "
      "\"echo run >> " +
      Out() + "/runs.$RANK; sleep 5\"]\n");
  ASSERT_TRUE(cluster_->WaitForJobState(id, "running", 20 * kSecond));
  const std::string node = cluster_->FirstTaskNode(id);
  ASSERT_FALSE(node.empty()) << cluster_->Job(id).dump(2);
  cluster_->KillAgent(node, SIGKILL);
  cluster_->StartAgent(node);
  ASSERT_TRUE(cluster_->WaitForJobState(id, "succeeded", 30 * kSecond))
      << cluster_->Job(id).dump(2) << "\n"
      << cluster_->JobEvents(id);
  EXPECT_EQ(ReadFile(Out() + "/runs.0"), "run\n");
  EXPECT_EQ(ReadFile(Out() + "/runs.1"), "run\n");
  EXPECT_EQ(cluster_->Job(id)["attempt"], 0);
}

// A task that ends while no agent runs on its node (an agent crashed, or stopped for an upgrade):
// the node's fence keeper outlives the agent and keeps how the task ended, and the next agent
// reports that. Before, such a task was reported "ended while the agent was down; its exit status
// is unknown" (-1) and its job failed although the task succeeded.
TEST_F(ControlPlaneTest, ATaskThatEndsWhileItsAgentIsDownKeepsItsExitStatus) {
  fs::create_directories(Out());
  const std::string go = Out() + "/go";
  auto job = [&](const std::string& name, int code, const std::string& on) {
    return Submit("name: " + name + (on.empty() ? "" : "\ninclude_nodes: [" + on + "]") +
                  "\ntasks:\n  - gpus: 1\n    command: [\"/bin/sh\", \"-c\", " + "\"while [ ! -f " +
                  go + " ]; do sleep 0.05; done; exit " + std::to_string(code) + "\"]\n");
  };
  const uint64_t ok = job("ends-well", 0, "");
  ASSERT_TRUE(cluster_->WaitForJobState(ok, "running", 20 * kSecond));
  const std::string node = cluster_->FirstTaskNode(ok);
  const uint64_t bad = job("ends-badly", 3, node);
  ASSERT_TRUE(cluster_->WaitForJobState(bad, "running", 20 * kSecond));
  cluster_->KillAgent(node, SIGKILL);
  std::ofstream(go) << "go\n";
  std::this_thread::sleep_for(std::chrono::seconds(1));  // both end while no agent runs
  cluster_->StartAgent(node);
  ASSERT_TRUE(cluster_->WaitForJobState(ok, "succeeded", 30 * kSecond))
      << cluster_->Job(ok).dump(2) << "\n"
      << cluster_->JobEvents(ok);
  ASSERT_TRUE(cluster_->WaitForJobState(bad, "failed", 30 * kSecond)) << cluster_->JobEvents(bad);
  EXPECT_NE(cluster_->JobEvents(bad).find("exited with code 3"), std::string::npos)
      << cluster_->JobEvents(bad);
  EXPECT_EQ(cluster_->Job(ok)["attempt"], 0);
}

TEST_F(ControlPlaneTest, KilledAgentMarksItsNodeLostAndTheGangRunsAgainWhole) {
  fs::create_directories(Out());
  uint64_t id = Submit(
      "name: gang\ntasks:\n  - replicas: 2\n    gpus: 8\n    command: [\"/bin/sh\", \"-c\", \"echo "
      "$HANGAR_ATTEMPT $HANGAR_NODE >> " +
      Out() + "/runs; exec sleep 1000\"]\n");
  ASSERT_TRUE(cluster_->WaitForJobState(id, "running", 20 * kSecond));
  auto job = cluster_->Job(id);
  const std::string victim = job["task_list"][0]["node"];
  const std::string other = job["task_list"][1]["node"];
  cluster_->KillAgent(victim, SIGKILL);
  // The controller's heartbeat timeout is 3 s (how fast is measured by bench/fleet_scale).
  ASSERT_TRUE(LocalCluster::WaitFor(
      [&] { return cluster_->Get("/v1/nodes/" + victim)["state"] == "lost"; }, 15 * kSecond));
  // Requeued whole: attempt 1 runs both tasks again, not on the lost node.
  ASSERT_TRUE(LocalCluster::WaitFor(
      [&] {
        auto j = cluster_->Job(id);
        return j["attempt"] == 1 && j["state"] == "running";
      },
      20 * kSecond))
      << cluster_->Job(id).dump(2);
  auto again = cluster_->Job(id);
  EXPECT_EQ(again["restarts"], 1);
  for (const auto& t : again["task_list"]) EXPECT_NE(t["node"], victim);
  // The surviving task of attempt 0 was stopped: exactly 4 runs, 2 per attempt. ("running" means
  // the processes started; on a loaded machine their first line may come a moment later.)
  std::string runs;
  LocalCluster::WaitFor(
      [&] {
        runs = ReadFile(Out() + "/runs");
        return std::count(runs.begin(), runs.end(), '\n') >= 4;
      },
      10 * kSecond);
  EXPECT_EQ(std::count(runs.begin(), runs.end(), '\n'), 4) << runs;
  EXPECT_NE(runs.find("0 " + other), std::string::npos);
  int status = 0;
  cluster_->Post("/v1/jobs/" + std::to_string(id) + "/cancel", "", &status);
}

TEST_F(ControlPlaneTest, BadInputGetsAClearErrorAndChangesNothing) {
  struct Case {
    std::string body;
    int status;
    std::string message;
  } cases[] = {
      {"name: x\ntasks: [\n", 400, "request body:"},
      {"name: x\nqueue: nope\ntasks:\n  - {gpus: 1, command: [x]}\n", 400,
       "queue 'nope' does not exist"},
      {"name: x\ntasks:\n  - {gpus: 9, command: [x]}\n", 422,
       "can never run on this cluster: asks 9 GPUs per replica, largest node has 8"},
      {"name: x\ntasks:\n  - {gpus: 1}\n", 400, "has no command"},
      {std::string(100 * 1024 * 1024, 'a'), 413, "over 1 MiB"},
  };
  for (const auto& c : cases) {
    int status = 0;
    auto r = cluster_->Post("/v1/jobs", c.body, &status);
    EXPECT_EQ(status, c.status) << c.body.substr(0, 60);
    ASSERT_TRUE(r.is_object()) << c.body.substr(0, 60);
    EXPECT_NE(r["error"]["message"].get<std::string>().find(c.message), std::string::npos)
        << r.dump();
  }
  int status = 0;
  auto r = cluster_->Post("/v1/jobs/12345/cancel", "", &status);
  EXPECT_EQ(status, 404);
  EXPECT_NE(r["error"]["message"].get<std::string>().find("job 12345 does not exist"),
            std::string::npos);
  cluster_->Get("/v1/nope", &status);
  EXPECT_EQ(status, 404);
  // Nothing was accepted, and the controller still works.
  EXPECT_EQ(cluster_->Get("/v1/jobs")["jobs"].size(), 0u);
  EXPECT_EQ(cluster_->Get("/healthz")["status"], "ok");
  uint64_t id = Submit("name: ok\ntasks:\n  - {gpus: 1, command: [\"true\"]}\n");
  EXPECT_TRUE(cluster_->WaitForJobState(id, "succeeded", 20 * kSecond));
}

TEST_F(ControlPlaneTest, MetricsAreExposedAndPassPromtool) {
  std::string text;
  // Every agent's stream is up (on a loaded machine the last one may still be connecting).
  EXPECT_TRUE(LocalCluster::WaitFor(
      [&] {
        text = cluster_->GetText("/metrics");
        return text.find("hangar_agents_connected 4") != std::string::npos;
      },
      20 * kSecond))
      << text;
  EXPECT_NE(text.find("# TYPE hangar_scheduler_cycle_seconds histogram"), std::string::npos);
  EXPECT_NE(text.find("hangar_gpus{state=\"idle\"}"), std::string::npos);
  ASSERT_TRUE(LocalCluster::WaitFor(
      [&] {
        return cluster_->GetText("/metrics").find("DCGM_FI_DEV_GPU_UTIL{gpu=\"7\"") !=
               std::string::npos;
      },
      20 * kSecond));
  std::string dcgm = cluster_->GetText("/metrics?labels=dcgm");
  EXPECT_NE(dcgm.find("modelName=\"H100-SXM-80GB\",Hostname=\"node-"), std::string::npos);
  // Issue 15: dcgm-exporter's form as its etc/default-counters.csv has it -- names, types, help --
  // so its Grafana dashboards work unchanged; plus who holds each GPU.
  for (const char* line :
       {"# TYPE DCGM_FI_DEV_SM_CLOCK gauge", "# TYPE DCGM_FI_DEV_MEM_CLOCK gauge",
        "# TYPE DCGM_FI_DEV_MEMORY_TEMP gauge", "# TYPE DCGM_FI_DEV_GPU_TEMP gauge",
        "# TYPE DCGM_FI_DEV_POWER_USAGE gauge",
        "# TYPE DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION counter",
        "# TYPE DCGM_FI_DEV_PCIE_REPLAY_COUNTER counter", "# TYPE DCGM_FI_DEV_GPU_UTIL gauge",
        "# TYPE DCGM_FI_DEV_MEM_COPY_UTIL gauge", "# TYPE DCGM_FI_DEV_XID_ERRORS gauge",
        "# TYPE DCGM_FI_DEV_FB_FREE gauge", "# TYPE DCGM_FI_DEV_FB_USED gauge",
        "# TYPE DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS counter",
        "# TYPE DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS counter",
        "# TYPE DCGM_FI_DEV_ROW_REMAP_FAILURE gauge",
        "# HELP DCGM_FI_DEV_ROW_REMAP_FAILURE Whether remapping of rows has failed\n"}) {
    EXPECT_TRUE(Contains(dcgm, line)) << line;
  }
  EXPECT_TRUE(Contains(text, "# TYPE DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION gauge"))
      << "the default form stays lint-clean";
  EXPECT_TRUE(Contains(text, "# TYPE hangar_placements_total counter"));
  EXPECT_TRUE(Contains(text, "# TYPE hangar_agent_heartbeats_total counter"));
  // A node is ready once it has registered and passed validation, which can follow its stream.
  EXPECT_TRUE(LocalCluster::WaitFor(
      [&] {
        return Contains(cluster_->GetText("/metrics"),
                        "hangar_node_state{node=\"node-1\",state=\"ready\"} 1");
      },
      20 * kSecond))
      << cluster_->GetText("/metrics");
  int status = 0;
  auto bad = cluster_->Get("/metrics?labels=xml", &status);
  EXPECT_EQ(status, 400);
  EXPECT_TRUE(Contains(bad.dump(), "labels must be dcgm")) << bad.dump();
  // A running job's GPUs carry its id, queue and user.
  const uint64_t id = Submit("name: attributed\ntasks:\n  - {gpus: 8, command: [sleep, \"30\"]}\n");
  ASSERT_TRUE(cluster_->WaitForJobState(id, "running", 20 * kSecond));
  const std::string held = ",job=\"" + std::to_string(id) + "\",queue=\"default\",user=\"";
  EXPECT_TRUE(Contains(cluster_->GetText("/metrics"), held)) << held;
  EXPECT_TRUE(Contains(cluster_->GetText("/metrics?labels=dcgm"), held));
  ASSERT_EQ(std::system("command -v promtool >/dev/null 2>&1"), 0)
      << "promtool comes with the test dependencies (prometheus)";
  const std::string path = cluster_->dir() + "/metrics.txt";
  std::ofstream(path) << cluster_->GetText("/metrics");
  EXPECT_EQ(std::system(("promtool check metrics < " + path + " > " + path + ".lint 2>&1").c_str()),
            0)
      << ReadFile(path + ".lint");
}

}  // namespace
}  // namespace hangar::testing

namespace hangar::testing {
namespace {

bool TorchAvailable() {
  return std::system("/usr/bin/python3 -c 'import torch.distributed' >/dev/null 2>&1") == 0;
}

TEST_F(ControlPlaneTest, TorchDistributedAllReduceAcrossTwoAgents) {
  if (!TorchAvailable())
    GTEST_SKIP() << "Debian's python3-torch is not installed (scripts/test.sh installs it)";
  fs::create_directories(Out());
  const std::string script = std::string(HANGAR_SOURCE_DIR) + "/tests/integration/allreduce.py";
  uint64_t id = Submit(
      "name: allreduce\ntasks:\n  - replicas: 2\n    gpus: 8\n    env: {GLOO_SOCKET_IFNAME: lo}\n"
      "    command: [/usr/bin/python3, " +
      script + ", " + Out() + "]\n");
  ASSERT_TRUE(cluster_->WaitForJobState(id, "succeeded", 120 * kSecond))
      << cluster_->Job(id).dump(2) << "\n"
      << cluster_->GetText("/v1/jobs/" + std::to_string(id) + "/logs?task=0&stream=stderr");
  EXPECT_EQ(ReadFile(Out() + "/allreduce.0"), "3 3\n");
  EXPECT_EQ(ReadFile(Out() + "/allreduce.1"), "3 3\n");
  std::set<std::string> nodes;
  const auto job = cluster_->Job(id);
  for (const auto& t : job["task_list"]) nodes.insert(t["node"].get<std::string>());
  EXPECT_EQ(nodes.size(), 2u);
}

}  // namespace
}  // namespace hangar::testing

namespace hangar::testing {
namespace {

// The last ```yaml block of a document.
std::string LastYamlBlock(const std::string& doc) {
  const std::string text = ReadFile(std::string(HANGAR_SOURCE_DIR) + "/" + doc);
  const size_t at = text.rfind("```yaml\n");
  if (at == std::string::npos) return "";
  const size_t end = text.find("```", at + 8);
  return text.substr(at + 8, end - at - 8);
}

// docs/job-format.md's torchrun example as written: `torchrun train.py` with no flags on two
// nodes finds its rendezvous from the PET_* variables Hangar sets (without them every node took
// torchrun's defaults: node 0 of 1, port 29500, and the second failed to bind).
TEST_F(ControlPlaneTest, TorchrunWithoutFlagsRunsATwoNodeGangFromTheDocs) {
  ASSERT_TRUE(TorchAvailable())
      << "Debian's python3-torch is missing: scripts/install-deps.sh --test installs it";
  std::string yaml = LastYamlBlock("docs/job-format.md");
  ASSERT_NE(yaml.find("[/usr/bin/torchrun, train.py]"), std::string::npos) << yaml;
  const std::string dir = std::string(HANGAR_SOURCE_DIR) + "/examples/torchrun";
  yaml.replace(yaml.find("workdir: ."), 10, "workdir: " + dir);  // what `hangar submit` does
  const uint64_t id = Submit(yaml);
  ASSERT_TRUE(cluster_->WaitForJobState(id, "succeeded", 180 * kSecond))
      << cluster_->Job(id).dump(2) << "\n"
      << cluster_->GetText("/v1/jobs/" + std::to_string(id) + "/logs?task=1&stream=stderr");
  std::set<std::string> nodes;
  const auto job = cluster_->Job(id);
  for (const auto& t : job["task_list"]) nodes.insert(t["node"].get<std::string>());
  EXPECT_EQ(nodes.size(), 2u);
  const std::string out = cluster_->GetText("/v1/jobs/" + std::to_string(id) + "/logs?task=0") +
                          cluster_->GetText("/v1/jobs/" + std::to_string(id) + "/logs?task=1");
  EXPECT_NE(out.find("rank 0 of 2: all_reduce gave 3, expected 3"), std::string::npos) << out;
  EXPECT_NE(out.find("rank 1 of 2: all_reduce gave 3, expected 3"), std::string::npos) << out;
}

}  // namespace
}  // namespace hangar::testing
