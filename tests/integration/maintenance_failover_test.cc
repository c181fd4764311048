// Rolling maintenance across a controller failover (docs/maintenance.md, "Restarts and
// failovers"): two controllers on one PostgreSQL store of the test's own and eight real agents
// with fake GPUs, started with --allow-maintenance-commands. `hangar maintain` walks them two at a
// time; midway, with the second batch's commands under way, the leader is killed with SIGKILL and
// the standby takes over. The run resumes from the store: no node runs its command twice, and the
// run stops at node-5, whose command fails, naming it and why; the last batch is never touched.
// A checkpointing job runs all along: each drain of its node checkpoints it, and it resumes from
// its checkpoint on a node in service, under either leader.
#include <gtest/gtest.h>
#include <httplib.h>
#include <signal.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <thread>

#include "ha_cluster.h"
#include "train_script.h"

namespace hangar::testing {
namespace {

std::vector<std::string> Nodes() {
  std::vector<std::string> out;
  for (int i = 1; i <= 8; ++i) out.push_back("node-" + std::to_string(i));
  return out;
}

bool WaitFor(const std::function<bool()>& done, Duration timeout) {
  const int64_t until = MonotonicNanos() + timeout * 1'000'000;
  while (!done()) {
    if (MonotonicNanos() > until) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return true;
}

std::string ReadAll(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::vector<std::string> SortedLines(const std::string& path) {
  std::ifstream in(path);
  std::vector<std::string> out;
  for (std::string l; std::getline(in, l);) {
    if (!l.empty()) out.push_back(l);
  }
  std::sort(out.begin(), out.end());
  return out;
}

class MaintenanceFailoverTest : public ::testing::Test {
 protected:
  void SetUp() override {
    HaOptions o;
    o.controllers = 2;
    o.nodes = Nodes();
    o.agent_args = {"--allow-maintenance-commands"};
    auto c = HaCluster::Start(o);
    ASSERT_TRUE(c.ok()) << c.status().ToString();
    cluster_ = std::move(*c);
    ASSERT_TRUE(WaitFor(
        [&] {
          for (const auto& n : Nodes()) {
            auto j = cluster_->Get("/v1/nodes/" + n);
            if (!j.is_object() || j.value("state", "") != "ready") return false;
          }
          return true;
        },
        60 * kSecond))
        << cluster_->Get("/v1/nodes").dump(2);
  }
  // POSTs to the leader; the status (0: no answer) and the answer.
  nlohmann::json PostToLeader(const std::string& path, const std::string& body, int* status,
                              const std::string& type = "application/json") {
    const int l = cluster_->Leader();
    *status = 0;
    if (l < 0) return nullptr;
    httplib::Client c(cluster_->api(l));
    c.set_read_timeout(5, 0);
    auto r = c.Post(path, body, type);
    if (!r) return nullptr;
    *status = r->status;
    return nlohmann::json::parse(r->body, nullptr, false);
  }
  nlohmann::json Run() { return cluster_->Get("/v1/maintenance/1"); }
  std::string JobState(uint64_t id) {
    return cluster_->Get("/v1/jobs/" + std::to_string(id)).value("state", "");
  }
  std::map<std::string, std::string> Steps() {
    std::map<std::string, std::string> out;
    auto r = Run();
    if (!r.is_object() || !r.contains("nodes")) return out;
    for (const auto& n : r["nodes"]) out[n.value("node", "")] = n.value("step", "");
    return out;
  }
  std::unique_ptr<HaCluster> cluster_;
};

TEST_F(MaintenanceFailoverTest, TheStandbyResumesTheRunNoNodeRunsTwiceAndItStopsAtTheFailure) {
  // Each node's command notes itself and takes a moment; node-5's fails, late enough that node-6,
  // of the same batch, has run and returned by then.
  const std::string commands = cluster_->dir() + "/commands";
  const std::string command = "echo \"$HANGAR_NODE\" >> " + commands +
                              "; echo \"updating $HANGAR_NODE\"; sleep 2; "
                              "if [ \"$HANGAR_NODE\" = node-5 ]; then sleep 4; echo 'firmware "
                              "image rejected' >&2; exit 7; fi";
  const std::string out = cluster_->dir() + "/out";
  std::filesystem::create_directories(out);
  std::ofstream(cluster_->dir() + "/train.sh") << TrainScript(out);
  int status = 0;
  auto job = PostToLeader("/v1/jobs",
                          "name: train\ncheckpoint: {signal: SIGUSR1, grace: 120s}\ntasks:\n"
                          "  - gpus: 1\n    command: [\"/bin/sh\", \"" +
                              cluster_->dir() + "/train.sh\"]\n",
                          &status, "application/yaml");
  ASSERT_EQ(status, 201) << job.dump();
  const uint64_t id = job.value("id", uint64_t{0});
  ASSERT_TRUE(WaitFor([&] { return std::atoi(ReadAll(out + "/step").c_str()) >= 3; }, 30 * kSecond))
      << cluster_->Get("/v1/jobs/" + std::to_string(id)).dump(2);

  auto run = PostToLeader(
      "/v1/maintenance",
      nlohmann::json{{"nodes", "all"}, {"batch", 2}, {"run", command}, {"timeout", "2m"}}.dump(),
      &status);
  ASSERT_EQ(status, 201) << run.dump(2);
  EXPECT_EQ(run.value("batches", 0), 4);

  // Midway, with the second batch's commands under way, the leader dies; the standby takes over.
  ASSERT_TRUE(WaitFor(
      [&] {
        auto s = Steps();
        return s["node-3"] == "running" || s["node-4"] == "running";
      },
      90 * kSecond))
      << Run().dump(2);
  const int old = cluster_->Leader();
  ASSERT_GE(old, 0);
  cluster_->Signal(old, SIGKILL);
  ASSERT_NE(cluster_->WaitExit(old, 10 * kSecond), -1);
  const int now = cluster_->WaitLeader(30 * kSecond);
  ASSERT_GE(now, 0) << cluster_->Describe();
  ASSERT_NE(now, old);
  // The old leader comes back, as a standby.
  ASSERT_TRUE(cluster_->StartController(old).ok()) << cluster_->Describe();

  ASSERT_TRUE(WaitFor([&] { return Run().value("state", "") == "failed"; }, 120 * kSecond))
      << Run().dump(2) << cluster_->Describe();
  const nlohmann::json done = Run();
  EXPECT_EQ(done.value("failure", ""),
            "node-5: its command exited with status 7 (last line: firmware image rejected)");
  auto steps = Steps();
  for (int i = 1; i <= 8; ++i) {
    const std::string n = "node-" + std::to_string(i);
    const std::string want = i == 5 ? "failed" : i <= 6 ? "done" : "waiting";
    EXPECT_EQ(steps[n], want) << n << "\n" << done.dump(2);
  }
  // Every node of the first three batches ran its command once, the failover notwithstanding; the
  // last batch's never ran.
  std::vector<std::string> want;
  for (int i = 1; i <= 6; ++i) want.push_back("node-" + std::to_string(i));
  EXPECT_EQ(SortedLines(commands), want);
  // node-5 stays out of service for its operator; the others are back, validated.
  EXPECT_EQ(cluster_->Get("/v1/nodes/node-5").value("state", ""), "drained");
  EXPECT_TRUE(WaitFor(
      [&] {
        for (const auto& n : Nodes()) {
          if (n != "node-5" && cluster_->Get("/v1/nodes/" + n).value("state", "") != "ready")
            return false;
        }
        return true;
      },
      30 * kSecond))
      << cluster_->Get("/v1/nodes").dump(2);

  // The job was checkpointed whenever its node's batch drained, and resumed from its checkpoint:
  // never failed, never started from scratch again.
  ASSERT_TRUE(WaitFor([&] { return JobState(id) == "running"; }, 30 * kSecond))
      << cluster_->Get("/v1/jobs/" + std::to_string(id)).dump(2);
  std::vector<std::string> runs;
  std::istringstream lines(ReadAll(out + "/runs"));
  for (std::string l; std::getline(lines, l);) runs.push_back(l);
  ASSERT_GE(runs.size(), 2u) << ReadAll(out + "/runs");
  EXPECT_FALSE(ReadAll(out + "/checkpoints").empty());
  for (size_t r = 1; r < runs.size(); ++r) {
    EXPECT_GE(std::atoi(ReadAll(out + "/resumed." + std::to_string(r)).c_str()), 3)
        << "run " << r << " did not resume from its checkpoint: " << ReadAll(out + "/runs");
  }
  PostToLeader("/v1/jobs/" + std::to_string(id) + "/cancel", "", &status);
  EXPECT_EQ(status, 200);
  EXPECT_TRUE(WaitFor([&] { return JobState(id) == "cancelled"; }, 30 * kSecond));
}

}  // namespace
}  // namespace hangar::testing
