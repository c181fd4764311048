// Queue-driven MIG reshaping end to end (issue 22): a real controller and an agent with fake MIG
// GPUs, whose instances the agent really keeps (its fake backend's layout file). MIG jobs that
// find no instance get one cut for them; instances in use are never touched; a fixed layout from
// cluster.yaml is created by the agent and never re-cut.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>

#include "local_cluster.h"

namespace hangar::testing {
namespace {

namespace fs = std::filesystem;

constexpr const char* kCluster =
    "node_defaults: {gpus: 1, gpu_model: H100-SXM-80GB, gpu_memory: 80Gi, cpu: 16, memory: 64Gi, "
    "mig: true}\n"
    "nodes: [{name: node-1}]\n";

class MigReshapeTest : public ::testing::Test {
 protected:
  void Start(const std::string& extra = "") {
    cluster_ = std::make_unique<LocalCluster>(std::string(kCluster) + extra);
    cluster_->StartController();
    cluster_->StartAgent("node-1");
    ASSERT_TRUE(cluster_->WaitForAgents(1))
        << "the agent did not register; see " << cluster_->dir();
  }
  // A MIG job whose task writes its environment to env-NAME and runs until release-NAME exists.
  uint64_t Submit(const std::string& name, const std::string& profile) {
    const std::string d = cluster_->dir();
    const std::string yaml = "name: " + name + "\ntasks: [{mig: " + profile +
                             ", command: [sh, -c, 'env > " + d + "/env-" + name + ".tmp && mv " +
                             d + "/env-" + name + ".tmp " + d + "/env-" + name + "; while [ ! -e " +
                             d + "/release-" + name + " ]; do sleep 0.1; done']}]\n";
    int status = 0;
    auto r = cluster_->Post("/v1/jobs", yaml, &status);
    EXPECT_EQ(status, 201) << r.dump();
    return r.value("id", uint64_t{0});
  }
  std::string EnvOf(const std::string& name, const std::string& key) {
    const std::string path = cluster_->dir() + "/env-" + name;
    if (!LocalCluster::WaitFor([&] { return fs::exists(path); }, 20 * kSecond))
      return "(did not start)";
    for (const auto& line : Lines(ReadFile(path))) {
      if (line.rfind(key + "=", 0) == 0) return line.substr(key.size() + 1);
    }
    return "";
  }
  void Release(const std::string& name) {
    std::ofstream(cluster_->dir() + "/release-" + name) << "";
  }
  std::string StateOf(uint64_t id) {
    return cluster_->Get("/v1/jobs/" + std::to_string(id)).value("state", "");
  }
  double Metric(const std::string& series) {
    for (const auto& line : Lines(cluster_->GetText("/metrics"))) {
      if (line.rfind(series + " ", 0) == 0) return std::stod(line.substr(series.size() + 1));
    }
    return -1;
  }
  std::string Events() { return cluster_->Get("/v1/events?limit=200").dump(); }
  std::unique_ptr<LocalCluster> cluster_;
};

TEST_F(MigReshapeTest, InstancesAreCutForTheQueueAndBusyOnesAreLeftAlone) {
  Start();
  const uint64_t a = Submit("a", "3g.40gb");
  EXPECT_EQ(EnvOf("a", "HANGAR_MIG_PLACEMENT"), "0:4");  // the 3g keeps the 4g's home free
  EXPECT_EQ(EnvOf("a", "CUDA_VISIBLE_DEVICES").rfind("MIG-", 0), 0u)
      << EnvOf("a", "CUDA_VISIBLE_DEVICES");
  const uint64_t b = Submit("b", "4g.40gb");  // fits the free slices: nothing destroyed
  EXPECT_EQ(EnvOf("b", "HANGAR_MIG_PLACEMENT"), "0:0");
  EXPECT_TRUE(LocalCluster::WaitFor(
      [&] { return Metric("hangar_mig_reshapes_total{result=\"done\"}") == 2; }, 10 * kSecond))
      << cluster_->GetText("/metrics");
  // A 7g needs the whole GPU, which two running tasks hold: no reshape may touch them.
  const uint64_t c = Submit("c", "7g.80gb");
  std::this_thread::sleep_for(std::chrono::seconds(2));
  EXPECT_EQ(StateOf(c), "pending");
  EXPECT_EQ(Metric("hangar_mig_reshapes_total{result=\"done\"}"), 2);
  EXPECT_EQ(Metric("hangar_mig_reshapes_total{result=\"failed\"}"), 0);
  EXPECT_EQ(StateOf(a), "running");
  EXPECT_EQ(StateOf(b), "running");
  // Once they end, their idle instances are destroyed and the 7g is cut.
  Release("a");
  Release("b");
  EXPECT_EQ(EnvOf("c", "HANGAR_MIG_PLACEMENT"), "0:0") << Events();
  EXPECT_EQ(Metric("hangar_mig_reshapes_total{result=\"done\"}"), 3);
  const std::string events = Events();
  EXPECT_NE(events.find("3g.40gb@4"), std::string::npos) << events;
  EXPECT_NE(events.find("-> 7g.80gb@0"), std::string::npos) << events;
  Release("c");
  EXPECT_TRUE(LocalCluster::WaitFor([&] { return StateOf(c) == "succeeded"; }, 20 * kSecond));
}

TEST_F(MigReshapeTest, AFixedLayoutIsMadeByTheAgentAndNeverRecut) {
  Start("mig: {fixed_layouts: {node-1: [3g.40gb, 3g.40gb]}}\n");
  const uint64_t a = Submit("a", "3g.40gb");
  EXPECT_NE(EnvOf("a", "HANGAR_MIG_PLACEMENT"), "(did not start)");
  const uint64_t c = Submit("c", "1g.10gb");
  std::this_thread::sleep_for(std::chrono::seconds(2));
  EXPECT_EQ(StateOf(c), "pending");  // no 1g in the fixed layout, and it is never re-cut
  EXPECT_EQ(Metric("hangar_mig_reshapes_total{result=\"done\"}"), 0);
  Release("a");
  EXPECT_TRUE(LocalCluster::WaitFor([&] { return StateOf(a) == "succeeded"; }, 20 * kSecond));
}

}  // namespace
}  // namespace hangar::testing
