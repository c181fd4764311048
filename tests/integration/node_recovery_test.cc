// Issue 15, item 10: a node marked lost comes back by itself once its agent beats again. A real
// controller and agents; one agent is stopped (SIGSTOP) past the heartbeat timeout, so its node is
// lost and its gang requeued, then continued (SIGCONT) on the same stream: the controller has it
// register again, its old task is stopped, and the node is ready for work without an agent
// restart or `hangar remediate`.
#include <gtest/gtest.h>

#include <csignal>
#include <thread>

#include "local_cluster.h"

namespace hangar::testing {
namespace {

constexpr const char* kCluster =
    "node_defaults: {gpus: 2, gpu_model: H100-SXM-80GB, gpu_memory: 80Gi, cpu: 16, memory: 128Gi}\n"
    "nodes: [{name: node-1}, {name: node-2}]\n";

TEST(NodeRecoveryTest, AStoppedAgentThatResumesBringsItsNodeBack) {
  LocalCluster cluster(kCluster);
  cluster.StartController();
  cluster.StartAllAgents({"node-1", "node-2"});
  auto state = [&](const std::string& node) {
    return cluster.Get("/v1/nodes/" + node).value("state", "");
  };
  ASSERT_TRUE(LocalCluster::WaitFor(
      [&] { return state("node-1") == "ready" && state("node-2") == "ready"; }, 20 * kSecond));
  // One job on each node (each takes a node's two GPUs).
  for (int i = 0; i < 2; ++i) {
    int status = 0;
    cluster.Post("/v1/jobs", "name: j\ntasks: [{gpus: 2, command: [sleep, '120']}]\n", &status);
    ASSERT_EQ(status, 201);
  }
  ASSERT_TRUE(cluster.WaitForJobState(1, "running", 20 * kSecond));
  ASSERT_TRUE(cluster.WaitForJobState(2, "running", 20 * kSecond));
  const std::string node = cluster.Job(1)["task_list"][0].value("node", "");
  ASSERT_FALSE(node.empty());
  cluster.SignalAgent(node, SIGSTOP);
  ASSERT_TRUE(LocalCluster::WaitFor([&] { return state(node) == "lost"; }, 10 * kSecond))
      << state(node);
  // Requeued: preempting while its task may still run on the lost node (until that node's lease
  // and fence have run out), then pending.
  const std::string requeued = cluster.Job(1).value("state", "");
  EXPECT_TRUE(requeued == "preempting" || requeued == "pending")
      << "its gang was requeued: " << requeued;
  cluster.SignalAgent(node, SIGCONT);
  // Back by itself: the agent re-registers, reports its old task, which is stopped (recovering),
  // and then the node is ready and takes the requeued job again.
  EXPECT_TRUE(LocalCluster::WaitFor([&] { return state(node) == "ready"; }, 20 * kSecond))
      << cluster.Get("/v1/nodes/" + node).dump();
  EXPECT_TRUE(cluster.WaitForJobState(1, "running", 20 * kSecond)) << cluster.Job(1).dump();
  EXPECT_EQ(cluster.Job(1).value("attempt", 0u), 1u);
  bool back = false;
  for (const auto& e : cluster.Get("/v1/nodes/" + node).value("events", nlohmann::json::array())) {
    back |= Contains(e.value("message", ""), "came back");
  }
  EXPECT_TRUE(back);
}

}  // namespace
}  // namespace hangar::testing
