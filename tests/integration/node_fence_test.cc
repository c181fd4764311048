// A node fences itself (docs/operations.md, "The node lease"): with its agent killed by kill -9 and
// never back, the task it started is stopped by the node's fence keeper when the node's lease runs
// out, and the controller starts the job's next attempt elsewhere only after that. The tasks record
// their own start and keep writing ticks, so the test compares the attempts' intervals as the
// tasks themselves saw them. A controller outage alone (killed and restarted within the lease)
// stops nothing: the new controller's registrations extend the lease.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>

#include <filesystem>
#include <thread>

#include "local_cluster.h"

namespace hangar::testing {
namespace {

namespace fs = std::filesystem;

constexpr const char* kCluster =
    "node_defaults: {gpus: 1, gpu_model: H100-SXM-80GB, gpu_memory: 80Gi, cpu: 16, memory: 64Gi}\n"
    "nodes: [{name: node-1}, {name: node-2}]\n";

// A job whose task writes its own start time, then a tick every 50 ms, under `marks`
// (<task id>.start, <task id>.ticks; nanoseconds since the epoch).
std::string TickingJob(const std::string& marks) {
  const std::string script = "f=" + marks +
                             "/$HANGAR_TASK_ID; date +%s%N > $f.start; "
                             "while :; do date +%s%N >> $f.ticks; sleep 0.05; done";
  nlohmann::json spec = {{"name", "ticker"},
                         {"tasks", {{{"gpus", 1}, {"command", {"/bin/sh", "-c", script}}}}}};
  return spec.dump();
}

struct Interval {
  int64_t start = 0, last = 0;  // ns
};

// What the task of `task_id` recorded itself: its start and its last tick.
Interval Recorded(const std::string& marks, const std::string& task_id) {
  Interval i;
  const auto start = Lines(ReadFile(marks + "/" + task_id + ".start"));
  const auto ticks = Lines(ReadFile(marks + "/" + task_id + ".ticks"));
  if (!start.empty()) i.start = std::stoll(start.back());
  if (!ticks.empty()) i.last = std::stoll(ticks.back());
  return i;
}

class NodeFenceTest : public ::testing::Test {
 protected:
  void Start(std::vector<std::string> controller_args) {
    cluster_ = std::make_unique<LocalCluster>(kCluster, std::move(controller_args));
    marks_ = cluster_->dir() + "/marks";
    fs::create_directories(marks_);
    chmod(marks_.c_str(), 0777);
    cluster_->StartController();
    cluster_->StartAllAgents({"node-1", "node-2"});
    ASSERT_TRUE(cluster_->WaitForAgents(2, 20 * kSecond));
    int status = 0;
    cluster_->Post("/v1/jobs", TickingJob(marks_), &status);
    ASSERT_EQ(status, 201);
    ASSERT_TRUE(cluster_->WaitForJobState(1, "running", 20 * kSecond)) << cluster_->Job(1).dump();
    ASSERT_TRUE(
        LocalCluster::WaitFor([&] { return Recorded(marks_, "1.0.0").last > 0; }, 10 * kSecond));
  }
  void TearDown() override {
    if (!cluster_) return;
    int status = 0;
    cluster_->Post("/v1/jobs/1/cancel", "", &status);
  }

  std::unique_ptr<LocalCluster> cluster_;
  std::string marks_;
};

TEST_F(NodeFenceTest, AKilledAgentsTaskStopsBeforeTheNextAttemptStarts) {
  Start({"--heartbeat-interval", "250ms", "--heartbeat-timeout", "1s", "--node-lease", "3s"});
  const std::string victim = cluster_->Job(1)["task_list"][0].value("node", "");
  cluster_->KillAgent(victim, SIGKILL);  // and it never comes back
  ASSERT_TRUE(LocalCluster::WaitFor(
      [&] {
        auto j = cluster_->Job(1);
        return j.value("attempt", 0) == 1 && j.value("state", "") == "running";
      },
      30 * kSecond))
      << cluster_->Job(1).dump();
  // Attempt 1 runs on the other node; give it time to tick, then compare what each task saw.
  ASSERT_TRUE(
      LocalCluster::WaitFor([&] { return Recorded(marks_, "1.1.0").last > 0; }, 10 * kSecond));
  std::this_thread::sleep_for(std::chrono::seconds(1));
  const Interval first = Recorded(marks_, "1.0.0"), second = Recorded(marks_, "1.1.0");
  ASSERT_GT(second.start, 0);
  EXPECT_LT(first.last, second.start)
      << "attempt 0 still ran " << (first.last - second.start) / 1000000
      << " ms after attempt 1 had started";
  // The keeper says so, and so does the job's history.
  EXPECT_TRUE(Contains(ReadFile(cluster_->dir() + "/agents/" + victim + "/fence/fenced.log"),
                       "\"task\":\"1.0.0\""));
  bool waited = false;
  const auto events = cluster_->Get("/v1/events?subject=job/1");
  for (const auto& e : events.value("events", nlohmann::json::array())) {
    waited |= Contains(e.value("message", ""), "lease has run out");
  }
  EXPECT_TRUE(waited) << events.dump();
}

TEST_F(NodeFenceTest, AControllerOutageWithinTheLeaseStopsNothing) {
  Start({"--heartbeat-interval", "250ms", "--heartbeat-timeout", "1s", "--node-lease", "5s"});
  cluster_->KillController(SIGKILL);
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  cluster_->StartController();
  ASSERT_TRUE(cluster_->WaitForAgents(2, 20 * kSecond));
  // Well past the lease granted before the outage: only the new controller's grants kept it.
  std::this_thread::sleep_for(std::chrono::seconds(6));
  const Interval i = Recorded(marks_, "1.0.0");
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  EXPECT_GT(Recorded(marks_, "1.0.0").last, i.last) << "the task stopped ticking";
  auto j = cluster_->Job(1);
  EXPECT_EQ(j.value("state", ""), "running")
      << j.dump() << "\nevents: " << cluster_->Get("/v1/events").dump() << "\ncontroller log:\n"
      << ReadFile(cluster_->dir() + "/controller.log") << "\nagent log:\n"
      << ReadFile(cluster_->dir() + "/agent-node-1.log");
  EXPECT_EQ(j.value("attempt", 0), 0) << j.dump();
}

}  // namespace
}  // namespace hangar::testing
