#include "controller/state/goodput_ledger.h"

#include <gtest/gtest.h>

namespace hangar::controller {
namespace {

using L = GoodputLedger;

Duration Part(const nlohmann::json& g, const char* part) { return g["parts"][part]["ms"]; }

// The five parts always add up to the wall time.
void ExpectAddsUp(const nlohmann::json& g) {
  Duration sum = 0;
  for (const auto& [name, p] : g["parts"].items()) sum += p["ms"].get<Duration>();
  EXPECT_EQ(sum, g["wall_ms"].get<Duration>()) << g.dump();
}

TEST(GoodputLedgerTest, SplitsWallTimeIntoSetupProductiveLostRestartAndWait) {
  L l;
  l.Placed(1, 0, 16'000, true, 0);
  l.Running(1, 0, 2'000);
  EXPECT_TRUE(l.Progress(1, 0, 1, 1'000'000, 5'000));     // productive from its first report
  EXPECT_FALSE(l.Progress(1, 0, 84, 1'000'000, 88'000));  // a step a second
  l.Checkpoint(1, 0, 60'000);
  l.WillRequeue(1, "hung: rank 1 on b (step 84) reported no progress for 10s");
  l.Ended(1, 0, "requeued", 90'000);
  auto g = l.Json(1, 95'000);
  EXPECT_EQ(Part(g, "setup"), 5'000);
  EXPECT_EQ(Part(g, "productive"), 55'000);   // 5 s .. the checkpoint at 60 s
  EXPECT_EQ(Part(g, "lost_work"), 30'000);    // since the checkpoint
  EXPECT_EQ(Part(g, "requeue_wait"), 5'000);  // so far
  EXPECT_EQ(g["recent"][0]["lost_basis"], "checkpoint");
  EXPECT_EQ(g["by_cause"]["hang"]["count"], 1);
  ExpectAddsUp(g);

  l.Placed(1, 1, 16'000, true, 100'000);
  l.Running(1, 1, 103'000);
  // It resumed from step 56, the checkpoint's: the step agrees with the checkpoint's figure.
  l.Progress(1, 1, 57, 1'000'000, 110'000);
  l.Ended(1, 1, "succeeded", 200'000);
  g = l.Json(1, 500'000);
  EXPECT_EQ(g["wall_ms"], 200'000);
  EXPECT_EQ(Part(g, "restart"), 10'000);
  EXPECT_EQ(Part(g, "requeue_wait"), 10'000);
  EXPECT_EQ(Part(g, "productive"), 55'000 + 90'000);
  EXPECT_DOUBLE_EQ(g["ettr"].get<double>(), 145'000.0 / 200'000.0);
  EXPECT_DOUBLE_EQ(g["parts"]["lost_work"]["gpu_hours"].get<double>(), 16.0 * 30 / 3600);
  EXPECT_EQ(g["by_cause"]["hang"]["restart_ms"], 10'000);
  EXPECT_EQ(g["by_cause"]["hang"]["requeue_wait_ms"], 10'000);
  EXPECT_EQ(g["ended_ms"], 200'000);
  ExpectAddsUp(g);
}

TEST(GoodputLedgerTest, TheStepTheNextAttemptResumesFromRevisesTheLostWork) {
  L l;
  l.Placed(2, 0, 8'000, true, 0);
  l.Running(2, 0, 1'000);
  for (uint64_t step = 1; step <= 100; ++step)  // one step a second, from 4 s
    l.Progress(2, 0, step, 1'000'000, 3'000 + static_cast<Time>(step) * 1'000);
  // No checkpoint reported: as far as the controller knows, the whole run (99 s) is lost.
  l.WillRequeue(2, "node node-3 lost (no heartbeat for 3s)");
  l.Ended(2, 0, "requeued", 113'000);
  EXPECT_EQ(Part(l.Json(2, 113'000), "lost_work"), 109'000);
  l.Placed(2, 1, 8'000, true, 120'000);
  // It resumed from step 60 (its first report is step 61): 40 steps redone, and the 10 s of
  // silence before the interruption produced nothing.
  l.Progress(2, 1, 61, 1'000'000, 130'000);
  auto g = l.Json(2, 130'000);
  EXPECT_EQ(Part(g, "lost_work"), 50'000);
  EXPECT_EQ(g["recent"][0]["lost_basis"], "steps");
  EXPECT_EQ(g["recent"][0]["cause"], "node_lost");
  EXPECT_EQ(Part(g, "productive"), 109'000 - 50'000);
  EXPECT_EQ(Part(g, "restart"), 10'000);
  ExpectAddsUp(g);
}

TEST(GoodputLedgerTest, ACheckpointWrittenWhileTheInterruptedAttemptStopsKeepsItsWork) {
  L l;
  l.Placed(3, 0, 1'000, true, 0);
  l.Progress(3, 0, 1, 0, 10'000);
  l.Progress(3, 0, 9, 0, 58'000);
  l.WillRequeue(3, "node n1 draining: Xid 79 on GPU 3");
  l.Ended(3, 0, "requeued", 60'000);
  EXPECT_EQ(Part(l.Json(3, 60'000), "lost_work"), 50'000);  // no checkpoint: all of it
  l.Checkpoint(3, 1, 61'000);                               // not its attempt: nothing
  l.Checkpoint(3, 0, 62'000);                               // the checkpoint signal's checkpoint
  auto g = l.Json(3, 70'000);
  EXPECT_EQ(Part(g, "lost_work"), 2'000);  // only the silence since its last report
  EXPECT_EQ(g["by_cause"]["health"]["lost_work_ms"], 2'000);
  EXPECT_EQ(Part(g, "requeue_wait"), 10'000);
  ExpectAddsUp(g);
}

TEST(GoodputLedgerTest, AJobThatReportsNoProgressIsProductiveOnceItRuns) {
  L l;
  l.Placed(4, 0, 2'000, false, 0);
  EXPECT_EQ(Part(l.Json(4, 3'000), "setup"), 3'000);
  l.Running(4, 0, 4'000);
  auto g = l.Json(4, 10'000);
  EXPECT_EQ(Part(g, "setup"), 4'000);
  EXPECT_EQ(Part(g, "productive"), 6'000);
  EXPECT_EQ(g["attempt"]["productive_since_ms"], 4'000);
  // A job cancelled while it waits after an interruption: the wait ends with it.
  l.WillRequeue(4, "preempted for job 9: higher priority");
  l.Ended(4, 0, "requeued", 10'000);
  l.Ended(4, 1, "cancelled", 25'000);
  g = l.Json(4, 99'000);
  EXPECT_EQ(g["wall_ms"], 25'000);
  EXPECT_EQ(Part(g, "requeue_wait"), 15'000);
  EXPECT_EQ(Part(g, "lost_work"), 6'000);
  EXPECT_DOUBLE_EQ(g["by_cause"]["preemption"]["gpu_hours"].get<double>(), 2.0 * 21 / 3600);
  ExpectAddsUp(g);
  EXPECT_TRUE(l.Json(5, 0).is_null());
}

TEST(GoodputLedgerTest, StoredFiguresRestoreTheSameAndTheClusterSumsThem) {
  L l;
  l.Placed(1, 0, 8'000, true, 0);
  l.Progress(1, 0, 1, 500'000, 1'000);
  l.Progress(1, 0, 20, 500'000, 10'500);
  l.Checkpoint(1, 0, 8'000);
  l.WillRequeue(1, "hung: ranks 0 on a (step 20) ...");
  l.Ended(1, 0, "requeued", 20'000);
  l.Placed(1, 1, 8'000, true, 30'000);
  l.Progress(1, 1, 17, 500'000, 32'000);
  l.Placed(2, 0, 1'000, false, 5'000);
  l.Running(2, 0, 6'000);
  l.Ended(2, 0, "succeeded", 16'000);

  L again;
  for (uint64_t id : {1, 2}) again.Restore(id, nlohmann::json::parse(l.Stored(id).dump()));
  for (uint64_t id : {1, 2}) EXPECT_EQ(again.Json(id, 40'000), l.Json(id, 40'000)) << id;
  EXPECT_EQ(again.ClusterJson(40'000), l.ClusterJson(40'000));
  // It goes on where it was: the restored attempt still revises and ends.
  again.Ended(1, 1, "succeeded", 50'000);
  l.Ended(1, 1, "succeeded", 50'000);
  EXPECT_EQ(again.Json(1, 60'000), l.Json(1, 60'000));

  auto c = l.ClusterJson(60'000);
  EXPECT_EQ(c["jobs"], 2);
  EXPECT_EQ(c["jobs_interrupted"], 1);
  EXPECT_EQ(c["by_cause"]["hang"]["count"], 1);
  const double productive = c["parts"]["productive"]["gpu_hours"];
  double all = 0;
  for (const auto& [name, p] : c["parts"].items()) all += p["gpu_hours"].get<double>();
  EXPECT_DOUBLE_EQ(c["ettr"].get<double>(), productive / all);
  EXPECT_DOUBLE_EQ(c["gpu_hours"].get<double>(), (8.0 * 50 + 1.0 * 11) / 3600);
  l.Forget(1);
  EXPECT_EQ(l.ClusterJson(60'000)["jobs"], 1);
  EXPECT_EQ(l.ClusterJson(60'000)["by_cause"]["hang"]["count"], 0);
  const std::string metrics = again.RenderMetrics(60'000);
  EXPECT_NE(metrics.find("hangar_goodput_gpu_seconds{part=\"lost_work\"}"), std::string::npos);
  EXPECT_NE(metrics.find("hangar_goodput_interruptions{cause=\"hang\"} 1"), std::string::npos);
}

TEST(GoodputLedgerTest, CausesComeFromTheRequeuesWords) {
  EXPECT_EQ(L::InterruptionCause("hung: rank 1 on b"), "hang");
  EXPECT_EQ(L::InterruptionCause("straggler: rank 1 on node b takes 0.286 s a step"), "straggler");
  EXPECT_EQ(L::InterruptionCause("preempted for job 4: x"), "preemption");
  EXPECT_EQ(L::InterruptionCause("node n1 lost (no heartbeat)"), "node_lost");
  EXPECT_EQ(L::InterruptionCause("node n1 draining: Xid 79"), "health");
  EXPECT_EQ(L::InterruptionCause("GPU 3 of n1 draining"), "health");
  EXPECT_EQ(L::InterruptionCause("node n1 failed the gang preflight before attempt 0 started: x"),
            "health");
  EXPECT_EQ(L::InterruptionCause("task 0 was stopped when node n1's agent exited"), "agent_exit");
  EXPECT_EQ(L::InterruptionCause("maintenance window m opens at ..."), "maintenance");
  EXPECT_EQ(L::InterruptionCause("requeued by alice"), "user");
  EXPECT_EQ(L::InterruptionCause("reclaimed: its GPUs stayed below 5%"), "idle_reclaim");
  EXPECT_EQ(L::InterruptionCause("something else"), "other");
}

}  // namespace
}  // namespace hangar::controller
