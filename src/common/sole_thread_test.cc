#include "common/sole_thread.h"

#include <gtest/gtest.h>

#include <chrono>

namespace hangar {
namespace {

using namespace std::chrono_literals;

TEST(SoleThreadTest, OneRunAtATimeAndTheNextAfterItEnds) {
  SoleThread t;
  std::atomic<bool> release{false};
  std::atomic<int> runs{0};
  auto run = [&] {
    ++runs;
    while (!release) std::this_thread::sleep_for(1ms);
  };
  ASSERT_TRUE(t.Start(run));
  EXPECT_TRUE(t.running());
  EXPECT_FALSE(t.Start(run)) << "the first still runs";
  release = true;
  t.Join();
  EXPECT_FALSE(t.running());
  EXPECT_TRUE(t.Start(run)) << "the first has ended";
  t.Join();
  EXPECT_EQ(runs, 2);
}

TEST(SoleThreadTest, DestroyingItWaitsForTheRun) {
  std::atomic<bool> ended{false};
  {
    SoleThread t;
    t.Start([&] {
      std::this_thread::sleep_for(20ms);
      ended = true;
    });
  }
  EXPECT_TRUE(ended);
}

}  // namespace
}  // namespace hangar
