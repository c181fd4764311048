// PreflightThreads on its own: one run per task at a time, a stop cancels it, StopAll cancels and
// joins every run and starts no more, and a passed report waits for its launch.
#include "agent/preflight_threads.h"

#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <mutex>

namespace hangar::agent {
namespace {

using namespace std::chrono_literals;

// A run that waits for its cancel, counting how many began and ended.
struct Runs {
  std::mutex mu;
  std::condition_variable cv;
  int began = 0, ended = 0;
  std::function<void(const std::atomic<bool>&)> UntilCancelled() {
    return [this](const std::atomic<bool>& cancel) {
      {
        std::lock_guard<std::mutex> l(mu);
        ++began;
        cv.notify_all();
      }
      while (!cancel.load()) std::this_thread::sleep_for(1ms);
      std::lock_guard<std::mutex> l(mu);
      ++ended;
      cv.notify_all();
    };
  }
  bool WaitFor(const std::function<bool()>& pred) {
    std::unique_lock<std::mutex> l(mu);
    return cv.wait_for(l, 10s, pred);
  }
};

TEST(PreflightThreadsTest, OneRunPerTaskAndAStopCancelsIt) {
  Runs runs;
  PreflightThreads p;
  ASSERT_TRUE(p.Start("7.0.0", runs.UntilCancelled()));
  ASSERT_TRUE(runs.WaitFor([&] { return runs.began == 1; }));
  EXPECT_FALSE(p.Start("7.0.0", runs.UntilCancelled())) << "a launch sent again waits for the run";
  EXPECT_FALSE(p.Stop("7.0.9")) << "no run for that task";
  EXPECT_TRUE(p.Stop("7.0.0"));
  ASSERT_TRUE(runs.WaitFor([&] { return runs.ended == 1; }));
  // The finished run is joined by the next start; the task may run again.
  std::this_thread::sleep_for(20ms);
  EXPECT_FALSE(p.Stop("7.0.0")) << "its run has ended";
  EXPECT_TRUE(p.Start("7.0.0", runs.UntilCancelled()));
  ASSERT_TRUE(runs.WaitFor([&] { return runs.began == 2; }));
  p.StopAll();
  EXPECT_EQ(runs.ended, 2);
}

TEST(PreflightThreadsTest, StopAllCancelsAndJoinsEveryRunAndStartsNoMore) {
  Runs runs;
  PreflightThreads p;
  for (const char* task : {"1.0.0", "1.0.1", "2.0.0"})
    ASSERT_TRUE(p.Start(task, runs.UntilCancelled()));
  ASSERT_TRUE(runs.WaitFor([&] { return runs.began == 3; }));
  p.StopAll();
  EXPECT_EQ(runs.ended, 3) << "joined before StopAll returned";
  EXPECT_FALSE(p.Start("3.0.0", runs.UntilCancelled())) << "none starts after StopAll";
  EXPECT_EQ(runs.began, 3);
}

TEST(PreflightThreadsTest, APassedReportWaitsForItsLaunchOnce) {
  PreflightThreads p;
  EXPECT_FALSE(p.TakePassed("7.0.0").has_value());
  pb::PreflightReport report;
  report.set_ok(true);
  report.set_summary("4 ranks, all-reduce 180 GB/s");
  // As the agent does: the run records its pass from its own thread.
  ASSERT_TRUE(p.Start("7.0.0", [&](const std::atomic<bool>&) { p.Passed("7.0.0", report); }));
  std::optional<pb::PreflightReport> taken;
  for (int i = 0; i < 1000 && !taken; ++i) {
    taken = p.TakePassed("7.0.0");
    if (!taken) std::this_thread::sleep_for(1ms);
  }
  ASSERT_TRUE(taken.has_value());
  EXPECT_EQ(taken->summary(), "4 ranks, all-reduce 180 GB/s");
  EXPECT_FALSE(p.TakePassed("7.0.0").has_value()) << "taken once";
}

}  // namespace
}  // namespace hangar::agent
