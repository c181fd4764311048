// The checkpoint protocol end to end (issue 6, "Must show"): a real controller and two real agents
// on loopback; a job whose task is a shell script that traps SIGUSR1, writes a checkpoint file,
// says so with `hangar checkpoint-done`, and resumes from it when run again. Draining its node
// requeues it: the agent sends SIGUSR1, releases the task with SIGTERM as soon as it reports
// (long before the grace), and the job runs again on the other node with HANGAR_RESTART_COUNT=1.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "local_cluster.h"

namespace hangar::testing {
namespace {

namespace fs = std::filesystem;

constexpr const char* kCluster = R"(
name: ckpt
node_defaults: {gpus: 2, gpu_model: H100-SXM-80GB, gpu_memory: 80Gi, cpu: 16, memory: 128Gi}
fabric:
  spines:
    - name: spine-0
      leaves:
        - {name: leaf-0, nodes: [{name: "node-[1-2]"}]}
)";

const std::vector<std::string> kNodes = {"node-1", "node-2"};

// The job's grace: the release must come long before it.
constexpr Duration kGrace = 120 * kSecond;

// The training job. Each run (by HANGAR_RESTART_COUNT, R) appends to files in $OUT:
//   runs         "start R NODE"
//   resumed.R    the step it resumed from, when a checkpoint was there
//   signals.R    "USR1 <ms>" and "TERM <ms>", in the order they came
//   ckdone.R     what `hangar checkpoint-done` printed, then "rc=N"
// The first run loops until signalled; a resumed run does a few more steps and succeeds.
std::string TrainScript(const std::string& out) {
  return R"SH(#!/bin/sh
OUT=')SH" +
         out + R"SH('
R="$HANGAR_RESTART_COUNT"
CK="$HANGAR_CHECKPOINT_DIR/ckpt"
now() { echo $(( $(date +%s%N) / 1000000 )); }
echo "start $R $HANGAR_NODE" >> "$OUT/runs"
step=0
if [ -f "$CK" ]; then
  step=$(cat "$CK")
  echo "$step" > "$OUT/resumed.$R"
fi
checkpoint() {
  echo "USR1 $(now)" >> "$OUT/signals.$R"
  mkdir -p "$HANGAR_CHECKPOINT_DIR"
  echo "$step" > "$CK.tmp" && mv "$CK.tmp" "$CK"
  hangar checkpoint-done --path "$CK" --step "$step" >> "$OUT/ckdone.$R" 2>&1
  echo "rc=$?" >> "$OUT/ckdone.$R"
  checkpointed=1
}
trap checkpoint USR1
trap 'echo "TERM $(now)" >> "$OUT/signals.$R"; exit 143' TERM
checkpointed=0
while :; do
  if [ "$checkpointed" = 0 ]; then step=$((step + 1)); fi
  echo "$step" > "$OUT/step.$R"
  if [ -f "$OUT/resumed.$R" ] && [ "$step" -ge $(( $(cat "$OUT/resumed.$R") + 3 )) ]; then exit 0; fi
  sleep 0.2 & wait $!
done
)SH";
}

class CheckpointTest : public ::testing::Test {
 protected:
  void SetUp() override {
    cluster_ = std::make_unique<LocalCluster>(kCluster);
    cluster_->StartController();
    for (const auto& n : kNodes) cluster_->StartAgent(n);
    ASSERT_TRUE(cluster_->WaitForNodesReady(kNodes)) << cluster_->Get("/v1/nodes").dump(2);
    fs::create_directories(Out());
  }
  std::string Out() { return cluster_->dir() + "/out"; }
  std::string Node(uint64_t id) { return cluster_->FirstTaskNode(id); }
  std::string Events(uint64_t id) { return cluster_->JobEvents(id); }
  std::unique_ptr<LocalCluster> cluster_;
};

// "USR1 <ms>" -> {"USR1", ms}, in file order.
std::vector<std::pair<std::string, int64_t>> Signals(const std::string& text) {
  std::vector<std::pair<std::string, int64_t>> out;
  for (const auto& line : Lines(text)) {
    std::istringstream in(line);
    std::string name;
    int64_t ms = 0;
    in >> name >> ms;
    out.emplace_back(name, ms);
  }
  return out;
}

TEST_F(CheckpointTest, DrainedTaskCheckpointsIsReleasedEarlyAndResumesElsewhere) {
  const std::string script = cluster_->dir() + "/train.sh";
  std::ofstream(script) << TrainScript(Out());
  int status = 0;
  auto r = cluster_->Post(
      "/v1/jobs",
      "name: train\ncheckpoint: {signal: SIGUSR1, grace: " + std::to_string(kGrace / kSecond) +
          "s}\ntasks:\n  - gpus: 1\n    command: [\"/bin/sh\", \"" + script + "\"]\n",
      &status);
  ASSERT_EQ(status, 201) << r.dump();
  const uint64_t id = r.value("id", uint64_t{0});
  ASSERT_TRUE(cluster_->WaitForJobState(id, "running", 20 * kSecond)) << cluster_->Job(id).dump(2);
  const std::string first = Node(id);
  ASSERT_FALSE(first.empty());
  // Let it make some progress, so that the checkpoint holds a step worth resuming from.
  ASSERT_TRUE(LocalCluster::WaitFor(
      [&] {
        const std::string s = ReadFile(Out() + "/step.0");
        return !s.empty() && std::atoi(s.c_str()) >= 2;
      },
      20 * kSecond))
      << ReadFile(Out() + "/runs");

  const Time drained = SystemClock::Default()->Now();
  cluster_->Post("/v1/nodes/" + first + "/drain", R"({"reason": "checkpoint test"})", &status);
  ASSERT_EQ(status, 200);

  // The first run: SIGUSR1, its report, then SIGTERM right after, far from the grace's end.
  ASSERT_TRUE(LocalCluster::WaitFor(
      [&] { return Contains(ReadFile(Out() + "/signals.0"), "TERM"); }, 30 * kSecond))
      << "signals: " << ReadFile(Out() + "/signals.0")
      << "\ncheckpoint-done: " << ReadFile(Out() + "/ckdone.0");
  auto signals = Signals(ReadFile(Out() + "/signals.0"));
  ASSERT_EQ(signals.size(), 2u) << ReadFile(Out() + "/signals.0");
  EXPECT_EQ(signals[0].first, "USR1");
  EXPECT_EQ(signals[1].first, "TERM");
  const Duration released_after = signals[1].second - signals[0].second;
  EXPECT_GE(released_after, 0);
  EXPECT_LT(released_after, kGrace / 4) << "the task was not released early";
  const std::string ckdone = ReadFile(Out() + "/ckdone.0");
  // The task's shell may take its TERM trap before it writes `rc=`: the client's own line says
  // that the agent took the report.
  EXPECT_TRUE(Contains(ckdone, "reported")) << ckdone;
  EXPECT_FALSE(Contains(ckdone, "rc=1")) << ckdone;
  const std::string checkpoint =
      ReadFile(cluster_->dir() + "/checkpoints/job-" + std::to_string(id) + "/ckpt");
  ASSERT_FALSE(checkpoint.empty());
  const int saved_step = std::atoi(checkpoint.c_str());
  EXPECT_GE(saved_step, 2);

  // The controller heard of the checkpoint.
  EXPECT_TRUE(LocalCluster::WaitFor([&] { return Contains(Events(id), "checkpoint written"); },
                                    10 * kSecond))
      << Events(id);
  EXPECT_TRUE(Contains(Events(id), "/ckpt (step " + std::to_string(saved_step) + ")"))
      << Events(id);

  // The second run: on the other node, restart count 1, resumed from the checkpoint, done.
  ASSERT_TRUE(cluster_->WaitForJobState(id, "succeeded", 30 * kSecond))
      << cluster_->Job(id).dump(2) << "\n"
      << Events(id) << "\nruns:\n"
      << ReadFile(Out() + "/runs");
  const Duration requeued_in = SystemClock::Default()->Now() - drained;
  auto runs = Lines(ReadFile(Out() + "/runs"));
  ASSERT_EQ(runs.size(), 2u) << ReadFile(Out() + "/runs");
  EXPECT_EQ(runs[0], "start 0 " + first);
  const std::string second = first == "node-1" ? "node-2" : "node-1";
  EXPECT_EQ(runs[1], "start 1 " + second);
  EXPECT_EQ(ReadFile(Out() + "/resumed.1"), std::to_string(saved_step) + "\n");
  EXPECT_FALSE(fs::exists(Out() + "/resumed.0"));
  EXPECT_FALSE(fs::exists(Out() + "/signals.1"));  // the resumed run was never signalled
  EXPECT_EQ(cluster_->Job(id).value("attempt", -1), 1);
  std::printf(
      "[measured] released %lld ms after SIGUSR1 (grace %lld ms); drain to success %lld ms\n",
      static_cast<long long>(released_after), static_cast<long long>(kGrace),
      static_cast<long long>(requeued_in));
}

// `hangar checkpoint-done` outside a task, or with no agent to hear it: exit 2 and say why.
std::pair<int, std::string> RunCommand(const std::string& command) {
  FILE* p = popen((command + " 2>&1").c_str(), "r");
  if (!p) return {-1, ""};
  std::string out;
  char buf[512];
  while (size_t n = fread(buf, 1, sizeof buf, p)) out.append(buf, n);
  int status = pclose(p);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out};
}

TEST(CheckpointDoneCommandTest, ExplainsWhyItCannotReport) {
  auto outside = RunCommand(std::string("env -i ") + HANGAR_BINARY + " checkpoint-done --path /x");
  EXPECT_EQ(outside.first, 2);
  EXPECT_TRUE(Contains(outside.second, "not inside a Hangar task: HANGAR_TASK_ID is not set"))
      << outside.second;

  auto unreachable = RunCommand(
      std::string("env -i HANGAR_TASK_ID=1.0.0 HANGAR_AGENT_SOCKET=/nonexistent/agent.sock ") +
      HANGAR_BINARY + " checkpoint-done");
  EXPECT_EQ(unreachable.first, 2);
  EXPECT_TRUE(Contains(unreachable.second, "cannot reach the agent at /nonexistent/agent.sock"))
      << unreachable.second;
}

}  // namespace
}  // namespace hangar::testing
