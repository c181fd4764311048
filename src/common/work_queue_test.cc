#include "common/work_queue.h"

#include <gtest/gtest.h>

#include <string>
#include <thread>
#include <vector>

namespace hangar {
namespace {

using namespace std::chrono_literals;

TEST(WorkQueueTest, ItemsComeOutInTheOrderPushed) {
  WorkQueue<std::string> q;
  std::atomic<bool> stop{false};
  q.Push("a");
  q.Push("b");
  EXPECT_EQ(q.size(), 2u);
  EXPECT_EQ(q.PopFor(1ms, &stop), "a");
  EXPECT_EQ(q.PopFor(1ms, &stop), "b");
  EXPECT_EQ(q.PopFor(1ms, &stop), std::nullopt) << "empty: nothing within the timeout";
}

TEST(WorkQueueTest, AConsumerWaitingIsWokenByAPushFromAnotherThread) {
  WorkQueue<int> q;
  std::atomic<bool> stop{false};
  std::thread producer([&] {
    std::this_thread::sleep_for(20ms);
    q.Push(7);
  });
  EXPECT_EQ(q.PopFor(10s, &stop), 7);
  producer.join();
}

TEST(WorkQueueTest, AStopEndsTheWaitAndLeavesTheItems) {
  WorkQueue<int> q;
  std::atomic<bool> stop{false};
  std::optional<int> got = 1;
  std::thread consumer([&] { got = q.PopFor(10s, &stop); });
  std::this_thread::sleep_for(20ms);
  stop = true;
  q.WakeAll();
  consumer.join();
  EXPECT_EQ(got, std::nullopt);
  q.Push(3);
  EXPECT_EQ(q.PopFor(1ms, &stop), std::nullopt) << "stopped: items stay";
  EXPECT_EQ(q.size(), 1u);
}

}  // namespace
}  // namespace hangar
