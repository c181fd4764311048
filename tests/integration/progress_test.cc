// Hang detection on real processes (docs/progress.md): a real controller and two real agents on
// loopback; a gang of two tasks, one reporting with `hangar progress`, the other writing the
// agent socket's line itself through the Python helper shipped in tools/python. Both report a few
// steps, then stop reporting while they keep running: the controller finds the job hung after its
// hang_timeout, says so (event, `hangar explain`, `hangar job`), sends the checkpoint signal, and
// restarts the gang, whose second attempt succeeds.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <algorithm>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "local_cluster.h"

namespace hangar::testing {
namespace {

namespace fs = std::filesystem;

constexpr const char* kCluster = R"(
name: progress
node_defaults: {gpus: 1, gpu_model: H100-SXM-80GB, gpu_memory: 80Gi, cpu: 16, memory: 64Gi}
fabric:
  spines:
    - name: spine-0
      leaves:
        - {name: leaf-0, nodes: [{name: "node-[1-2]"}]}
)";

const std::vector<std::string> kNodes = {"node-1", "node-2"};

// Each task appends to $OUT: "start R RANK" to runs; "USR1" to signals.R.RANK when signalled;
// "reported STEP rc" to reports.R.RANK. Its first run reports steps 1-4 (rank 0 with `hangar
// progress`, rank 1 with the Python helper), then sleeps on without reporting; a restarted run
// succeeds at once.
std::string TrainScript(const std::string& out, const std::string& helper_dir) {
  return R"SH(#!/bin/sh
OUT=')SH" +
         out + R"SH('
R="$HANGAR_RESTART_COUNT"
echo "start $R $RANK" >> "$OUT/runs"
[ "$R" = 0 ] || exit 0
trap 'echo USR1 >> "$OUT/signals.$R.$RANK"' USR1
trap 'exit 143' TERM
for step in 1 2 3 4; do
  if [ "$RANK" = 0 ]; then
    hangar progress "$step" --step-time 0.25
  else
    PYTHONPATH=')SH" +
         helper_dir +
         R"SH(' python3 -c "import sys, hangar_progress; sys.exit(0 if hangar_progress.report($step, 0.25) else 1)"
  fi
  echo "reported $step $?" >> "$OUT/reports.$R.$RANK"
  sleep 0.3
done
while :; do sleep 0.2 & wait $!; done
)SH";
}

std::pair<int, std::string> RunCommand(const std::string& command) {
  FILE* p = popen((command + " 2>&1").c_str(), "r");
  if (!p) return {-1, ""};
  std::string out;
  char buf[512];
  while (size_t n = fread(buf, 1, sizeof buf, p)) out.append(buf, n);
  int status = pclose(p);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out};
}

class ProgressTest : public ::testing::Test {
 protected:
  void SetUp() override {
    cluster_ = std::make_unique<LocalCluster>(kCluster);
    cluster_->StartController();
    for (const auto& n : kNodes) cluster_->StartAgent(n);
    ASSERT_TRUE(cluster_->WaitForNodesReady(kNodes)) << cluster_->Get("/v1/nodes").dump(2);
    fs::create_directories(Out());
  }
  std::string Out() { return cluster_->dir() + "/out"; }
  std::string Events(uint64_t id) { return cluster_->JobEvents(id); }
  std::string Cli(const std::string& args) {
    return RunCommand(std::string(HANGAR_BINARY) + " " + args +
                      " --server http://127.0.0.1:" + std::to_string(cluster_->api_port()))
        .second;
  }
  std::unique_ptr<LocalCluster> cluster_;
};

TEST_F(ProgressTest, AGangThatStopsReportingWhileAliveIsFoundHungAndRestarted) {
  const std::string script = cluster_->dir() + "/train.sh";
  std::ofstream(script) << TrainScript(Out(), fs::path(HANGAR_SOURCE_DIR) / "tools/python");
  int status = 0;
  auto r = cluster_->Post("/v1/jobs",
                          "name: train\nprogress: {hang_timeout: 4s, on_hang: restart}\n"
                          "checkpoint: {signal: SIGUSR1, grace: 3s}\n"
                          "tasks:\n  - replicas: 2\n    gpus: 1\n    command: [\"/bin/sh\", \"" +
                              script + "\"]\n",
                          &status);
  ASSERT_EQ(status, 201) << r.dump();
  const uint64_t id = r.value("id", uint64_t{0});
  ASSERT_TRUE(cluster_->WaitForJobState(id, "running", 20 * kSecond)) << cluster_->Job(id).dump(2);

  // Both ranks' reports reach the controller: each rank's last step, by its node.
  ASSERT_TRUE(LocalCluster::WaitFor(
      [&] {
        auto p = cluster_->Job(id)["progress"];
        if (!p.is_object() || p["ranks"].size() != 2) return false;
        for (const auto& rank : p["ranks"]) {
          if (rank.value("step", 0) < 1) return false;
        }
        return true;
      },
      20 * kSecond))
      << cluster_->Job(id).dump(2) << "\nreports: " << ReadFile(Out() + "/reports.0.0")
      << ReadFile(Out() + "/reports.0.1");
  EXPECT_EQ(ReadFile(Out() + "/reports.0.0").find(" 1\n"), std::string::npos)
      << "hangar progress failed";
  EXPECT_EQ(ReadFile(Out() + "/reports.0.1").find(" 1\n"), std::string::npos)
      << "the Python helper failed";

  // Then they stop reporting, alive: hung after the timeout, the checkpoint signal, a restart.
  ASSERT_TRUE(LocalCluster::WaitFor([&] { return cluster_->Job(id).value("restarts", 0) >= 1; },
                                    30 * kSecond))
      << Events(id) << cluster_->Job(id).dump(2);
  const std::string events = Events(id);
  // Which ranks: those silent for the whole timeout when it was checked (one or both).
  EXPECT_TRUE(Contains(events, "hung: rank")) << events;
  EXPECT_TRUE(Contains(events, " on node-")) << events;
  EXPECT_TRUE(Contains(events, "reported no progress for")) << events;
  EXPECT_TRUE(Contains(events, "(hang_timeout 4s; the furthest rank is at step ")) << events;
  EXPECT_TRUE(Contains(events, "; on_hang: restart")) << events;
  EXPECT_TRUE(Contains(events, "requeued whole: hung: ")) << events;
  ASSERT_TRUE(LocalCluster::WaitFor(
      [&] {
        return Contains(ReadFile(Out() + "/signals.0.0"), "USR1") &&
               Contains(ReadFile(Out() + "/signals.0.1"), "USR1");
      },
      20 * kSecond))
      << "the checkpoint signal first; runs: " << ReadFile(Out() + "/runs");
  ASSERT_TRUE(cluster_->WaitForJobState(id, "succeeded", 40 * kSecond))
      << Events(id) << cluster_->Job(id).dump(2);
  EXPECT_TRUE(Contains(ReadFile(Out() + "/runs"), "start 1 0")) << ReadFile(Out() + "/runs");

  // How long after the last report the hang was found (a figure, not asserted: the timeout
  // plus at most the once-a-second check, and the agent's once-a-second forwarding).
  int64_t last_report = 0, found = 0;
  const nlohmann::json job_view = cluster_->Job(id);
  const nlohmann::json job_events =
      cluster_->Get("/v1/events?subject=job/" + std::to_string(id) + "&limit=1000");
  for (const auto& rank : job_view["progress"]["ranks"])
    last_report = std::max(last_report, rank.value("at_ms", int64_t{0}));
  for (const auto& ev : job_events["events"]) {
    if (Contains(ev.value("message", ""), "on_hang: restart"))
      found = ev.value("time_ms", int64_t{0});
  }
  std::printf("[measured] hang found %lld ms after the last report taken (hang_timeout 4000 ms)\n",
              static_cast<long long>(found - last_report));

  // `hangar explain` and `hangar job` say why it was restarted, and where each rank stopped.
  const std::string explain = Cli("explain " + std::to_string(id));
  std::printf("$ hangar explain %llu\n%s$ hangar events job/%llu\n%s",
              static_cast<unsigned long long>(id), explain.c_str(),
              static_cast<unsigned long long>(id), Cli("events job/" + std::to_string(id)).c_str());
  EXPECT_TRUE(Contains(explain, "last hang (attempt 0): hung: rank")) << explain;
  const std::string job = Cli("job " + std::to_string(id));
  EXPECT_TRUE(Contains(job, "last hang (attempt 0): hung: ")) << job;
  EXPECT_TRUE(Contains(job, "RANK")) << job;

  // Goodput (docs/goodput.md): the hang threw away attempt 0's work (it wrote no checkpoint), the
  // gang waited while its tasks had their checkpoint grace, and the parts add up to the wall time.
  const std::string path = "/v1/jobs/" + std::to_string(id) + "/goodput";
  const nlohmann::json g = cluster_->Get(path)["goodput"];
  ASSERT_TRUE(g.is_object()) << cluster_->Get(path).dump(2);
  EXPECT_EQ(g["by_cause"]["hang"]["count"], 1) << g.dump(2);
  EXPECT_GT(g["parts"]["lost_work"]["ms"].get<int64_t>(), 0) << g.dump(2);
  EXPECT_GT(g["parts"]["requeue_wait"]["ms"].get<int64_t>(), 0) << g.dump(2);
  EXPECT_EQ(g["recent"][0]["lost_basis"], "runtime") << g.dump(2);
  int64_t sum = 0;
  for (const auto& [name, part] : g["parts"].items()) sum += part["ms"].get<int64_t>();
  EXPECT_EQ(sum, g["wall_ms"].get<int64_t>()) << g.dump(2);
  const std::string goodput = Cli("goodput " + std::to_string(id));
  std::printf("$ hangar goodput %llu\n%s", static_cast<unsigned long long>(id), goodput.c_str());
  EXPECT_TRUE(Contains(goodput, "lost_work")) << goodput;
  EXPECT_TRUE(Contains(goodput, "  hang ")) << goodput;
  EXPECT_EQ(cluster_->Get("/v1/goodput")["by_cause"]["hang"]["count"], 1);
  EXPECT_TRUE(Contains(cluster_->GetText("/metrics?gpus=0"),
                       "hangar_goodput_interruptions{cause=\"hang\"} 1"));
  // A restarted controller reads the same figures back from its store.
  cluster_->KillController(SIGTERM);
  cluster_->StartController();
  EXPECT_EQ(cluster_->Get(path)["goodput"], g);
}

// Stragglers on real processes: rank 1 reports step times four times rank 0's; after two such
// reports in a row it is named, with its node, on the job and on the node; the job runs on.
TEST_F(ProgressTest, ARankPersistentlySlowerThanTheGangIsNamedWithItsNode) {
  const std::string script = cluster_->dir() + "/steps.sh";
  std::ofstream(script) << "#!/bin/sh\nT=0.1; [ \"$RANK\" = 1 ] && T=0.4\n"
                           "for step in 1 2 3 4 5; do hangar progress $step --step-time $T || exit "
                           "3; sleep 1.1; done\n";
  int status = 0;
  auto r = cluster_->Post("/v1/jobs",
                          "name: steps\nprogress: {straggler_factor: 1.5, straggler_reports: 2}\n"
                          "tasks:\n  - replicas: 2\n    gpus: 1\n    command: [\"/bin/sh\", \"" +
                              script + "\"]\n",
                          &status);
  ASSERT_EQ(status, 201) << r.dump();
  const uint64_t id = r.value("id", uint64_t{0});
  ASSERT_TRUE(cluster_->WaitForJobState(id, "succeeded", 60 * kSecond))
      << Events(id) << cluster_->Job(id).dump(2);
  const std::string events = Events(id);
  EXPECT_TRUE(Contains(events, "straggler: rank 1 on node node-")) << events;
  EXPECT_TRUE(Contains(events, "takes 0.400 s a step, against the gang's median 0.100 s"))
      << events;
  const nlohmann::json view = cluster_->Job(id);
  ASSERT_EQ(view["progress"]["ranks"].size(), 2u) << view.dump(2);
  EXPECT_EQ(view["progress"]["ranks"][1]["straggler"], true);
  EXPECT_EQ(view["progress"]["ranks"][0]["straggler"], false);
  const std::string node = view["progress"]["ranks"][1].value("node", "");
  const nlohmann::json node_events =
      cluster_->Get("/v1/events?subject=node/" + node + "&limit=100");
  bool suspect = false;
  for (const auto& e : node_events["events"])
    suspect = suspect || Contains(e.value("message", ""), "suspect: straggler");
  EXPECT_TRUE(suspect) << node_events.dump(2);
}

TEST(ProgressCommandTest, ExplainsWhyItCannotReport) {
  auto outside = RunCommand(std::string("env -i ") + HANGAR_BINARY + " progress 5");
  EXPECT_EQ(outside.first, 2);
  EXPECT_TRUE(Contains(outside.second, "not inside a Hangar task: HANGAR_TASK_ID is not set"))
      << outside.second;
  auto unreachable = RunCommand(
      std::string("env -i HANGAR_TASK_ID=1.0.0 HANGAR_AGENT_SOCKET=/nonexistent/agent.sock ") +
      HANGAR_BINARY + " progress 5 --step-time 0.5");
  EXPECT_EQ(unreachable.first, 2);
  EXPECT_TRUE(Contains(unreachable.second, "cannot reach the agent at /nonexistent/agent.sock"))
      << unreachable.second;
}

}  // namespace
}  // namespace hangar::testing
