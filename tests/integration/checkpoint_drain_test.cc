// Checkpoints at NVMe speed (issue 19, item 5, "Must show"): two real agents with --scratch-dir
// under a real controller. The job's task checkpoints to node A's scratch and reports it; the
// agent answers at once and drains the checkpoint to the shared store (the controller's
// --checkpoint-root) in the background. Draining node A requeues the job, but only once the
// checkpoint is durable in the store: while the test holds the store's lock (as a slow store
// would) the job is not restarted anywhere. Then it runs on node B, whose agent restored the
// checkpoint into B's scratch before the task started, and the task resumes from it.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/file.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <thread>

#include "local_cluster.h"

namespace hangar::testing {
namespace {

namespace fs = std::filesystem;

constexpr const char* kCluster = R"(
name: ckpt-scratch
node_defaults: {gpus: 2, gpu_model: H100-SXM-80GB, gpu_memory: 80Gi, cpu: 16, memory: 128Gi}
fabric:
  spines:
    - name: spine-0
      leaves:
        - {name: leaf-0, nodes: [{name: "node-[1-2]"}]}
)";

const std::vector<std::string> kNodes = {"node-1", "node-2"};

// Each run R appends to $OUT: runs ("start R NODE CHECKPOINT_DIR STORE"), resumed.R (the step it
// resumed from), ckdone.R (what `hangar checkpoint-done` printed). The checkpoint is the step and
// 8 MiB of weights. The first run checkpoints once on its own when $OUT/go appears (timing.0:
// "rc=N ms=M", how long the report blocked), then loops until signalled; a resumed run does a few
// more steps and succeeds.
std::string TrainScript(const std::string& out) {
  return R"SH(#!/bin/sh
OUT=')SH" +
         out + R"SH('
R="$HANGAR_RESTART_COUNT"
CK="$HANGAR_CHECKPOINT_DIR/ckpt"
now() { echo $(( $(date +%s%N) / 1000000 )); }
echo "start $R $HANGAR_NODE $HANGAR_CHECKPOINT_DIR $HANGAR_CHECKPOINT_STORE" >> "$OUT/runs"
step=0
if [ -f "$CK" ] && [ -f "$HANGAR_CHECKPOINT_DIR/weights" ]; then
  step=$(cat "$CK")
  echo "$step" > "$OUT/resumed.$R"
fi
write() {
  head -c 8388608 /dev/zero > "$HANGAR_CHECKPOINT_DIR/weights.tmp" && mv "$HANGAR_CHECKPOINT_DIR/weights.tmp" "$HANGAR_CHECKPOINT_DIR/weights"
  echo "$step" > "$CK.tmp" && mv "$CK.tmp" "$CK"
}
checkpoint() {
  write
  hangar checkpoint-done --path "$CK" --step "$step" >> "$OUT/ckdone.$R" 2>&1
  checkpointed=1
}
trap checkpoint USR1
# SIGTERM (the release) may come while the report is still being written down: exit after it.
trap 'terminated=1' TERM
terminated=0
checkpointed=0
while :; do
  if [ "$terminated" = 1 ]; then exit 143; fi
  if [ "$R" = 0 ] && [ -f "$OUT/go" ] && [ ! -f "$OUT/timing.0" ]; then
    write
    t0=$(now)
    hangar checkpoint-done --path "$CK" --step "$step" >> "$OUT/ckdone.$R" 2>&1
    echo "rc=$? ms=$(( $(now) - t0 ))" > "$OUT/timing.0"
  fi
  if [ "$checkpointed" = 0 ]; then step=$((step + 1)); fi
  echo "$step" > "$OUT/step.$R"
  if [ -f "$OUT/resumed.$R" ] && [ "$step" -ge $(( $(cat "$OUT/resumed.$R") + 3 )) ]; then exit 0; fi
  sleep 0.2 & wait $!
done
)SH";
}

class ScratchCheckpointTest : public ::testing::Test {
 protected:
  void SetUp() override {
    cluster_ = std::make_unique<LocalCluster>(kCluster);
    cluster_->StartController();
    for (const auto& n : kNodes) cluster_->StartAgent(n, {"--scratch-dir", Scratch(n)});
    ASSERT_TRUE(cluster_->WaitForNodesReady(kNodes)) << cluster_->Get("/v1/nodes").dump(2);
    fs::create_directories(Out());
  }
  std::string Out() { return cluster_->dir() + "/out"; }
  std::string Scratch(const std::string& node) { return cluster_->dir() + "/scratch-" + node; }
  std::string Node(uint64_t id) { return cluster_->FirstTaskNode(id); }
  std::string Events(uint64_t id) { return cluster_->JobEvents(id); }
  std::unique_ptr<LocalCluster> cluster_;
};

TEST_F(ScratchCheckpointTest, ACheckpointWrittenOnOneNodeIsRestoredOnAnotherAfterADrain) {
  const std::string script = cluster_->dir() + "/train.sh";
  std::ofstream(script) << TrainScript(Out());
  int status = 0;
  auto r = cluster_->Post(
      "/v1/jobs",
      "name: train\ncheckpoint: {signal: SIGUSR1, grace: 120s}\ntasks:\n  - gpus: 1\n"
      "    command: [\"/bin/sh\", \"" +
          script + "\"]\n",
      &status);
  ASSERT_EQ(status, 201) << r.dump();
  const uint64_t id = r.value("id", uint64_t{0});
  const std::string job = "job-" + std::to_string(id);
  ASSERT_TRUE(cluster_->WaitForJobState(id, "running", 20 * kSecond)) << cluster_->Job(id).dump(2);
  const std::string first = Node(id);
  ASSERT_FALSE(first.empty());
  const std::string second = first == "node-1" ? "node-2" : "node-1";
  ASSERT_TRUE(LocalCluster::WaitFor(
      [&] {
        const std::string s = ReadFile(Out() + "/step.0");
        return !s.empty() && std::atoi(s.c_str()) >= 2;
      },
      20 * kSecond))
      << ReadFile(Out() + "/runs");
  const std::string store = cluster_->dir() + "/checkpoints/" + job;
  EXPECT_EQ(Lines(ReadFile(Out() + "/runs")).at(0),
            "start 0 " + first + " " + Scratch(first) + "/checkpoints/" + job + " " + store);

  // A slow store: the test holds its lock, so drains wait. The task's own checkpoint is reported at
  // once all the same.
  fs::create_directories(cluster_->dir() + "/checkpoints");
  const int lock =
      open((cluster_->dir() + "/checkpoints/." + job + ".lock").c_str(), O_RDWR | O_CREAT, 0600);
  ASSERT_GE(lock, 0);
  ASSERT_EQ(flock(lock, LOCK_EX), 0);
  std::ofstream(Out() + "/go") << "go\n";
  ASSERT_TRUE(LocalCluster::WaitFor([&] { return Contains(ReadFile(Out() + "/timing.0"), "rc="); },
                                    30 * kSecond))
      << ReadFile(Out() + "/ckdone.0");
  const std::string timing = ReadFile(Out() + "/timing.0");
  EXPECT_TRUE(Contains(timing, "rc=0")) << timing << ReadFile(Out() + "/ckdone.0");
  const int blocked_ms = std::atoi(timing.substr(timing.find("ms=") + 3).c_str());
  EXPECT_LT(blocked_ms, 2000) << timing;
  EXPECT_FALSE(fs::exists(store + "/ckpt"));

  // Draining the node: the checkpoint signal, the task's report, its release.
  cluster_->Post("/v1/nodes/" + first + "/drain", R"({"reason": "checkpoint drain test"})",
                 &status);
  ASSERT_EQ(status, 200);
  ASSERT_TRUE(LocalCluster::WaitFor(
      [&] { return Lines(ReadFile(Out() + "/ckdone.0")).size() >= 2; }, 30 * kSecond))
      << ReadFile(Out() + "/ckdone.0");
  const std::string ckdone = ReadFile(Out() + "/ckdone.0");
  EXPECT_TRUE(Contains(ckdone, "the task is released from its stop's grace")) << ckdone;
  const int saved_step =
      std::atoi(ReadFile(Scratch(first) + "/checkpoints/" + job + "/ckpt").c_str());
  EXPECT_GE(saved_step, 2);

  // The task ends, but its end is not reported while its drains wait: the job starts nowhere else.
  const std::string agent_log = cluster_->dir() + "/agent-" + first + ".log";
  ASSERT_TRUE(LocalCluster::WaitFor(
      [&] {
        return Contains(ReadFile(agent_log),
                        "its end is reported once its job's checkpoint is durable");
      },
      15 * kSecond))
      << ReadFile(agent_log);
  std::this_thread::sleep_for(std::chrono::seconds(2));
  EXPECT_EQ(Lines(ReadFile(Out() + "/runs")).size(), 1u) << ReadFile(Out() + "/runs");
  EXPECT_NE(Node(id), second) << "the job was placed elsewhere before its checkpoint was durable:\n"
                              << cluster_->Job(id).dump(2);
  EXPECT_FALSE(Contains(Events(id), "checkpoint written")) << Events(id);
  EXPECT_FALSE(fs::exists(store + "/ckpt"));

  // The store answers: the checkpoint is published, the controller hears of it, the job moves.
  flock(lock, LOCK_UN);
  close(lock);
  ASSERT_TRUE(cluster_->WaitForJobState(id, "succeeded", 40 * kSecond))
      << cluster_->Job(id).dump(2) << "\n"
      << Events(id) << "\nruns:\n"
      << ReadFile(Out() + "/runs") << "\nagent " << first << ":\n"
      << ReadFile(agent_log);
  EXPECT_TRUE(fs::is_symlink(store));
  EXPECT_EQ(std::atoi(ReadFile(store + "/ckpt").c_str()), saved_step);
  EXPECT_TRUE(Contains(Events(id), "checkpoint written by task 0 on " + first + ": " + store +
                                       "/ckpt (step " + std::to_string(saved_step) +
                                       "), drained to the shared store in"))
      << Events(id);

  // The second run: on the other node, from its own scratch, which its agent restored.
  auto runs = Lines(ReadFile(Out() + "/runs"));
  ASSERT_EQ(runs.size(), 2u) << ReadFile(Out() + "/runs");
  EXPECT_EQ(runs[1],
            "start 1 " + second + " " + Scratch(second) + "/checkpoints/" + job + " " + store);
  EXPECT_EQ(ReadFile(Out() + "/resumed.1"), std::to_string(saved_step) + "\n");
  EXPECT_EQ(fs::file_size(Scratch(second) + "/checkpoints/" + job + "/weights"), 8u << 20);
  EXPECT_TRUE(Contains(ReadFile(cluster_->dir() + "/agent-" + second + ".log"),
                       "restored .job-" + std::to_string(id) + ".gen-0000000002 from the store"));
  std::printf(
      "[measured] checkpoint-done blocked %d ms with --scratch-dir (8 MiB checkpoint, store "
      "locked)\n",
      blocked_ms);
}

}  // namespace
}  // namespace hangar::testing
