#include "sim/engine/pending_queue.h"

#include <gtest/gtest.h>

#include "sim/engine/sim_test_util.h"

namespace hangar::sim {
namespace {

std::vector<sched::JobId> Ids(const PendingQueue& q) {
  std::vector<sched::JobId> ids;
  for (const auto& p : q.jobs()) ids.push_back(p.id);
  return ids;
}

sched::PendingJob Waiting(sched::JobId id, int32_t priority, uint64_t seq) {
  sched::PendingJob p;
  p.id = id;
  p.priority = priority;
  p.seq = seq;
  return p;
}

TEST(PendingQueueTest, KeepsThePolicysOrderAsJobsComeAndGo) {
  auto policy = std::move(sched::queue::MakeQueuePolicy("priority")).value();
  PendingQueue q(*policy);
  q.Insert(Waiting(1, 0, 1));
  q.Insert(Waiting(2, 5, 2));  // higher priority: first
  q.Insert(Waiting(3, 0, 3));
  q.Insert(Waiting(4, 5, 4));  // equal key to job 2's but later: after it
  EXPECT_EQ(Ids(q), (std::vector<sched::JobId>{2, 4, 1, 3}));
  EXPECT_EQ(q.Find(1), 2u);
  EXPECT_EQ(q.Find(9), q.size());
  const std::vector<size_t> started = {3, 0};  // jobs 3 and 2
  q.EraseAll(started);
  EXPECT_EQ(Ids(q), (std::vector<sched::JobId>{4, 1}));
  // Job 1's priority rises above job 4's: it moves to the front.
  q.jobs()[1].priority = 9;
  q.Rekey(1);
  EXPECT_EQ(Ids(q), (std::vector<sched::JobId>{1, 4}));
  // Every key changes.
  q.RekeyAll([](sched::PendingJob& p) { p.priority = static_cast<int32_t>(p.id); });
  EXPECT_EQ(Ids(q), (std::vector<sched::JobId>{4, 1}));
  q.Erase(0);
  EXPECT_EQ(Ids(q), (std::vector<sched::JobId>{1}));
  q.CountCpuOnly(+2);
  q.CountCpuOnly(-1);
  EXPECT_EQ(q.cpu_only(), 1);
  q.Clear();
  EXPECT_TRUE(q.empty());
  EXPECT_EQ(q.cpu_only(), 0);
}

}  // namespace
}  // namespace hangar::sim
