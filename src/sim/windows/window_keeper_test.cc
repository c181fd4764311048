#include "sim/windows/window_keeper.h"

#include <gtest/gtest.h>

#include "sim/windows/windows_run.h"

namespace hangar::sim {
namespace {

// Two 8-GPU nodes and two 8-GPU jobs of 20 hours at 0; a maintenance window on node-1 from 10 h
// to 12 h. FIFO with backfill: the scheduler knows every run time.
WindowsScenario TwoJobs(Duration book_ahead) {
  WindowsScenario s;
  s.from = 0;
  s.nodes = 2;
  for (int i = 0; i < 2; ++i) {
    TraceJob t;
    t.row = static_cast<uint64_t>(i) + 1;
    t.submit = 0;
    t.runtime = 20 * kHour;
    t.gpus_per_replica = 8;
    s.trace.push_back(t);
  }
  SimReservation w;
  w.name = "maint";
  w.nodes = {1};
  w.start = 10 * kHour;
  w.end = 12 * kHour;
  w.maintenance = true;
  s.keeper.windows = {w};
  s.keeper.book_ahead = book_ahead;
  s.keeper.checkpoint_interval = 3 * kHour;
  return s;
}

struct Three {
  WindowsRun none, booked, unannounced;
};

Three RunAll(const WindowsScenario& s) {
  auto topo = WindowsCluster(s);
  Three t;
  for (auto [notice, out] :
       {std::pair{WindowNotice::kNone, &t.none}, std::pair{WindowNotice::kBooked, &t.booked},
        std::pair{WindowNotice::kUnannounced, &t.unannounced}}) {
    auto r = RunWindows(s, notice, topo);
    EXPECT_TRUE(r.ok()) << r.status().message();
    if (r.ok()) *out = std::move(*r);
  }
  return t;
}

// Booked a day ahead: the second job may not start on node-1 (it would cross 10 h), so node-1
// idles until the window (80 GPU-hours) and the job starts there after it, at 12 h. Without
// notice both start at 0; at 10 h the second is killed, loses the hour since its checkpoint at
// 9 h, and runs again from 12 h for its 11 hours and the restore.
TEST(WindowKeeperTest, BookedWindowIdlesItsNodesUnannouncedDrainLosesWork) {
  const Three t = RunAll(TwoJobs(kDay));
  EXPECT_EQ(t.none.ends, (std::vector<Time>{20 * kHour, 20 * kHour}));
  EXPECT_EQ(t.none.ledgers[0].idle_gpu_s_before, 0);
  EXPECT_EQ(t.none.ledgers[0].out_gpu_s, 0);  // nothing drained without a window

  EXPECT_EQ(t.booked.ends, (std::vector<Time>{20 * kHour, 32 * kHour}));
  EXPECT_DOUBLE_EQ(t.booked.ledgers[0].idle_gpu_s_before, 8.0 * 10 * 3600);
  EXPECT_EQ(t.booked.ledgers[0].requeued, 0);
  EXPECT_DOUBLE_EQ(t.booked.ledgers[0].out_gpu_s, 8.0 * 2 * 3600);

  EXPECT_EQ(t.unannounced.ends, (std::vector<Time>{20 * kHour, 23 * kHour + 30 * kSecond}));
  EXPECT_EQ(t.unannounced.ledgers[0].requeued, 1);
  EXPECT_DOUBLE_EQ(t.unannounced.ledgers[0].lost_gpu_s, 8.0 * 3600);
  EXPECT_EQ(t.unannounced.ledgers[0].idle_gpu_s_before, 0);

  const nlohmann::json j = WindowsJson(t.booked, t.none, TwoJobs(kDay));
  EXPECT_EQ(j["jobs_delayed"], 1);
  EXPECT_DOUBLE_EQ(j["job_hours_delayed"].get<double>(), 12.0);
  EXPECT_DOUBLE_EQ(j["windows"][0]["idle_gpu_hours_before_beyond_baseline"].get<double>(), 80.0);
}

// Booked only 5 hours ahead, after both jobs started: the one on node-1 is checkpointed and
// requeued at the window's start, losing nothing, and resumes at 12 h with 10 hours left.
TEST(WindowKeeperTest, ShortNoticeCheckpointsTheJobsThatCrossTheWindow) {
  const Three t = RunAll(TwoJobs(5 * kHour));
  EXPECT_EQ(t.booked.ends, (std::vector<Time>{20 * kHour, 22 * kHour + 30 * kSecond}));
  EXPECT_EQ(t.booked.ledgers[0].requeued, 1);
  EXPECT_EQ(t.booked.ledgers[0].lost_gpu_s, 0);
  EXPECT_EQ(t.booked.ledgers[0].idle_gpu_s_before, 0);
}

// Validated for 30 minutes after the window, as the controller validates a node back from a
// drain: node-1 takes work again at 12:30, and the half hour counts as out of service.
TEST(WindowKeeperTest, AWindowsNodesAreValidatedBeforeTheyTakeWorkAgain) {
  WindowsScenario s = TwoJobs(kDay);
  s.keeper.validation = 30 * kMinute;
  const Three t = RunAll(s);
  EXPECT_EQ(t.booked.ends, (std::vector<Time>{20 * kHour, 32 * kHour + 30 * kMinute}));
  EXPECT_DOUBLE_EQ(t.booked.ledgers[0].out_gpu_s, 8.0 * 2.5 * 3600);
  EXPECT_EQ(t.unannounced.ends,
            (std::vector<Time>{20 * kHour, 23 * kHour + 30 * kMinute + 30 * kSecond}));
  EXPECT_EQ(t.none.ends, (std::vector<Time>{20 * kHour, 20 * kHour}));  // no window: nothing
}

}  // namespace
}  // namespace hangar::sim
