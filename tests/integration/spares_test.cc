// Hot spares end to end (docs/goodput.md, "Hot spares in the controller"): a real controller and
// four real agents with fake GPUs on loopback, node-4 a spare. An Xid 79 under one node of a
// three-node gang: the gang keeps its two healthy nodes, takes the spare, and runs again from its
// checkpoint; its attempts never overlap, and a guaranteed job that waits meanwhile never gets the
// spare nor a node the gang keeps.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "local_cluster.h"

namespace hangar::testing {
namespace {

namespace fs = std::filesystem;

const std::string kCluster = R"(name: spares
node_defaults: {gpus: 8, gpu_model: H100-SXM-80GB, gpu_memory: 80Gi, cpu: 64, memory: 512Gi}
fabric:
  spines:
    - name: spine-0
      leaves:
        - {name: leaf-0, nodes: [{name: "node-[1-4]"}]}
spares: {nodes: [node-4]}
)";

class SparesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    cluster_ = std::make_unique<LocalCluster>(kCluster);
    cluster_->StartController();
    fs::create_directories(Out());
    for (const auto& n : kFourNodes) cluster_->StartAgent(n);
    ASSERT_TRUE(LocalCluster::WaitFor(
        [&] {
          for (const auto& n : kFourNodes) {
            if (cluster_->Get("/v1/nodes/" + n).value("state", "") != "ready") return false;
          }
          return true;
        },
        20 * kSecond))
        << cluster_->Get("/v1/nodes").dump(2);
  }
  void TearDown() override {
    if (HasFailure())
      std::printf("cluster directory (set HANGAR_KEEP_TEST_DIRS=1 to keep it): %s\n",
                  cluster_->dir().c_str());
  }
  std::string Out() { return cluster_->dir() + "/out"; }
  uint64_t Submit(const std::string& yaml) {
    int status = 0;
    auto r = cluster_->Post("/v1/jobs", yaml, &status);
    EXPECT_EQ(status, 201) << r.dump();
    return r.is_object() ? r.value("id", uint64_t{0}) : 0;
  }
  // The node of each task of the job's current attempt, by task index.
  std::map<int, std::string> Tasks(uint64_t id) {
    std::map<int, std::string> out;
    const auto job = cluster_->Job(id);  // not in the loop's header: that would dangle
    for (const auto& t : job["task_list"]) out[t.value("index", -1)] = t.value("node", "");
    return out;
  }
  std::unique_ptr<LocalCluster> cluster_;
};

// Each line of out/runs: "start|end MS ATTEMPT INDEX NODE".
std::string GangTask(const std::string& out) {
  const std::string log = " $HANGAR_ATTEMPT $HANGAR_TASK_INDEX $HANGAR_NODE >> " + out + "/runs";
  const std::string end = "echo end $(($(date +%s%N)/1000000))" + log + "; exit 0";
  return "name: gang\ncheckpoint: {signal: SIGUSR1, grace: 10s}\n"
         "tasks:\n  - replicas: 3\n    gpus: 8\n    command: [\"/bin/sh\", \"-c\", \"trap '" +
         end + "' USR1 TERM; echo start $(($(date +%s%N)/1000000))" + log +
         "; sleep 1000 & wait\"]\n";
}

TEST_F(SparesTest, AnXidUnderAGangTakesTheSpareAndKeepsTheHealthyNodes) {
  const std::string out = Out();
  const uint64_t gang = Submit(GangTask(out));
  ASSERT_TRUE(cluster_->WaitForJobState(gang, "running", 20 * kSecond))
      << cluster_->Job(gang).dump(2);
  const auto first = Tasks(gang);
  ASSERT_EQ(first.size(), 3u) << cluster_->Job(gang).dump(2);
  for (const auto& [index, node] : first) EXPECT_NE(node, "node-4") << "the spare took work";
  // A guaranteed job that fits one node waits: the only free node is the spare.
  const uint64_t waiting = Submit("name: one\ntasks: [{gpus: 8, command: [sleep, '1000']}]\n");
  ASSERT_TRUE(LocalCluster::WaitFor(
      [&] { return !cluster_->Job(waiting).value("reason", "").empty(); }, 10 * kSecond));
  ASSERT_EQ(cluster_->Job(waiting)["state"], "pending");

  // Xid 79 on the node of task 1, the documented way (docs/health.md).
  const std::string failed = first.at(1);
  const std::string dir = cluster_->dir() + "/agents/" + failed;
  std::ofstream(dir + "/faults.tmp") << "- {gpu: 0, kind: xid, code: 79}\n";
  fs::rename(dir + "/faults.tmp", dir + "/inject-faults.yaml");

  ASSERT_TRUE(LocalCluster::WaitFor(
      [&] {
        auto j = cluster_->Job(gang);
        return j["attempt"] == 1 && j["state"] == "running" &&
               Lines(ReadFile(out + "/runs")).size() >= 9;  // 3 starts, 3 ends, 3 starts
      },
      40 * kSecond))
      << cluster_->Job(gang).dump(2) << "\n"
      << ReadFile(out + "/runs");
  // In place: tasks 0 and 2 where they were, task 1 on the spare.
  const auto second = Tasks(gang);
  EXPECT_EQ(second.at(0), first.at(0));
  EXPECT_EQ(second.at(2), first.at(2));
  EXPECT_EQ(second.at(1), "node-4");
  EXPECT_EQ(cluster_->Job(waiting)["state"], "pending") << cluster_->Job(waiting).dump(2);

  // No task of attempt 1 started before every task of attempt 0 had ended.
  Time last_end = 0, first_start = kNever;
  int starts0 = 0, ends0 = 0, starts1 = 0;
  for (const std::string& line : Lines(ReadFile(out + "/runs"))) {
    std::istringstream in(line);
    std::string kind, node;
    Time ms = 0;
    int attempt = -1, index = -1;
    in >> kind >> ms >> attempt >> index >> node;
    if (attempt == 0 && kind == "end") last_end = std::max(last_end, ms), ++ends0;
    if (attempt == 0 && kind == "start") ++starts0;
    if (attempt == 1 && kind == "start") first_start = std::min(first_start, ms), ++starts1;
  }
  EXPECT_EQ(starts0, 3);
  EXPECT_EQ(ends0, 3) << "every task of attempt 0 checkpoints and ends\n"
                      << ReadFile(out + "/runs");
  EXPECT_EQ(starts1, 3);
  EXPECT_LE(last_end, first_start) << ReadFile(out + "/runs");

  // Explained: `hangar explain` and the job's events name the node replaced and the spare taken.
  const auto why = cluster_->Get("/v1/jobs/" + std::to_string(gang) + "/explain");
  ASSERT_TRUE(why.contains("replaced")) << why.dump(2);
  EXPECT_EQ(why["replaced"]["replacements"][0]["failed"], failed) << why.dump(2);
  EXPECT_EQ(why["replaced"]["replacements"][0]["with"], "node-4") << why.dump(2);
  EXPECT_EQ(why["replaced"]["replacements"][0]["spare"], true) << why.dump(2);
  const auto events =
      cluster_->Get("/v1/events?subject=job/" + std::to_string(gang) + "&limit=100");
  bool said = false;
  for (const auto& e : events.value("events", nlohmann::json::array())) {
    said |=
        Contains(e.value("message", ""), "node " + failed + " replaced in place by spare node-4");
  }
  EXPECT_TRUE(said) << events.dump(2);
  // The goodput ledger counts the interruption under its cause.
  const auto g = cluster_->Get("/v1/jobs/" + std::to_string(gang) + "/goodput")["goodput"];
  EXPECT_EQ(g["interruptions"], 1) << g.dump(2);
  EXPECT_TRUE(g["by_cause"].contains("health")) << g.dump(2);
}

}  // namespace
}  // namespace hangar::testing
