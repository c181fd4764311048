// Sharing end to end (issue 6): queues applied to a real controller, a guarantee reclaimed from a
// borrower running as real processes, and an idle job -- a process that holds its fake GPUs at
// 0% utilisation -- reclaimed per its queue's policy.
#include <gtest/gtest.h>

#include "local_cluster.h"

namespace hangar::testing {
namespace {

constexpr const char* kCluster =
    "node_defaults: {gpus: 8, gpu_model: H100-SXM-80GB, gpu_memory: 80Gi, cpu: 64, memory: 512Gi}\n"
    "nodes: [{name: node-1}, {name: node-2}]\n";

constexpr const char* kQueues =
    "queues:\n"
    "  - name: train\n    quota: {gpus: 8}\n"
    "  - name: notebooks\n    idle: {gpu_util_below: 5, for: 3s, action: stop}\n"
    "  - name: adhoc\n    idle: {gpu_util_below: 5, for: 3s, action: checkpoint-requeue}\n";

class SharingTest : public ::testing::Test {
 protected:
  void SetUp() override {
    cluster_ =
        std::make_unique<LocalCluster>(kCluster, std::vector<std::string>{"--stop-grace", "2s"});
    cluster_->StartController();
    cluster_->StartAllAgents({"node-1", "node-2"});
    ASSERT_TRUE(cluster_->WaitForAgents(2)) << "agents did not register; see " << cluster_->dir();
    int status = 0;
    auto r = cluster_->Post("/v1/queues", kQueues, &status);
    ASSERT_EQ(status, 200) << r.dump();
  }
  uint64_t Submit(const std::string& yaml) {
    int status = 0;
    auto r = cluster_->Post("/v1/jobs", yaml, &status);
    EXPECT_EQ(status, 201) << r.dump();
    return r.value("id", uint64_t{0});
  }
  std::unique_ptr<LocalCluster> cluster_;
};

TEST_F(SharingTest, AnIdleJobIsReclaimedPerItsQueuesPolicy) {
  // Holds its GPUs at 0% (the fake backend reads the task's util file) and never exits.
  const auto idle = Submit(
      "name: idle-notebook\nqueue: notebooks\n"
      "tasks: [{gpus: 2, command: [sh, -c, 'echo 0 > $HANGAR_FAKE_GPU_UTIL_FILE; exec sleep "
      "600']}]\n");
  // Busy (100%, the default for a GPU a task holds): untouched.
  const auto busy =
      Submit("name: busy\nqueue: notebooks\ntasks: [{gpus: 2, command: [sleep, '600']}]\n");
  ASSERT_TRUE(cluster_->WaitForJobState(idle, "running", 20 * kSecond));
  ASSERT_TRUE(cluster_->WaitForJobState(idle, "cancelled", 20 * kSecond))
      << cluster_->Job(idle).dump();
  const auto j = cluster_->Job(idle);
  EXPECT_EQ(j["message"].get<std::string>().rfind(
                "reclaimed: its GPUs stayed below 5% utilisation for 3s", 0),
            0u)
      << j.dump();
  EXPECT_NE(j["message"].get<std::string>().find("queue notebooks: its idle policy, stop"),
            std::string::npos);
  EXPECT_EQ(cluster_->Job(busy)["state"], "running");
  // Its GPUs went back to the pool, and the idle time is waste in the accounting.
  EXPECT_TRUE(LocalCluster::WaitFor(
      [&] {
        auto nodes = cluster_->Get("/v1/nodes");
        int free = 0;
        for (const auto& n : nodes["nodes"]) free += n["gpus_free"].get<int>();
        return free == 14;
      },
      10 * kSecond));
  auto usage = cluster_->Get("/v1/usage?by=queue&since=1h");
  double idle_hours = 0;
  for (const auto& row : usage["rows"]) {
    if (row["queue"] == "notebooks") idle_hours = row["idle_gpu_hours"].get<double>();
  }
  EXPECT_GT(idle_hours, 2 * 2.0 / 3600);  // two GPUs idle for at least two seconds
}

TEST_F(SharingTest, AnIdleJobIsCheckpointedAndRequeued) {
  const auto idle = Submit(
      "name: idle\nqueue: adhoc\ncheckpoint: {grace: 2s}\n"
      "tasks: [{gpus: 1, command: [sh, -c, 'echo 0 > $HANGAR_FAKE_GPU_UTIL_FILE; exec sleep "
      "600']}]\n");
  ASSERT_TRUE(cluster_->WaitForJobState(idle, "running", 20 * kSecond));
  // It is reclaimed only for someone: a job that needs every GPU, the idle one's too.
  Submit("name: waiter\nqueue: adhoc\ntasks: [{replicas: 2, gpus: 8, command: [sleep, '600']}]\n");
  ASSERT_TRUE(LocalCluster::WaitFor([&] { return cluster_->Job(idle)["restarts"].get<int>() >= 1; },
                                    30 * kSecond))
      << cluster_->Job(idle).dump();
  auto events = cluster_->Get("/v1/events?subject=job/" + std::to_string(idle));
  bool requeued = false;
  for (const auto& e : events["events"]) {
    requeued |= e["message"].get<std::string>().find(
                    "requeued whole: reclaimed: its GPUs stayed below 5%") != std::string::npos;
  }
  EXPECT_TRUE(requeued) << events.dump();
}

TEST_F(SharingTest, AGuaranteeIsReclaimedFromABorrower) {
  // adhoc has no guarantee: all 16 GPUs it takes are borrowed.
  const auto borrower = Submit(
      "name: borrower\nqueue: adhoc\ncheckpoint: {grace: 2s}\n"
      "tasks: [{replicas: 2, gpus: 8, command: [sleep, '600']}]\n");
  ASSERT_TRUE(cluster_->WaitForJobState(borrower, "running", 20 * kSecond));
  const auto guaranteed =
      Submit("name: train\nqueue: train\ntasks: [{gpus: 8, command: [sleep, '600']}]\n");
  ASSERT_TRUE(cluster_->WaitForJobState(guaranteed, "running", 20 * kSecond))
      << cluster_->Job(guaranteed).dump();
  const auto b = cluster_->Job(borrower);
  EXPECT_EQ(b["state"], "pending");
  EXPECT_NE(b["message"].get<std::string>().find("reclaims queue train's guarantee"),
            std::string::npos)
      << b.dump();
  // The borrower waits on its queue's room now, and says so.
  EXPECT_TRUE(LocalCluster::WaitFor(
      [&] {
        return cluster_->Job(borrower)["reason"].get<std::string>().find(
                   "queue adhoc may start 8 GPUs more") != std::string::npos;
      },
      10 * kSecond))
      << cluster_->Job(borrower).dump();
}

}  // namespace
}  // namespace hangar::testing
