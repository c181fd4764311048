#include "sched/queue/queue_policy.h"

#include <gtest/gtest.h>

namespace hangar::sched::queue {
namespace {

std::vector<uint32_t> Order(std::string_view policy, const std::vector<PendingJob>& jobs) {
  auto p = MakeQueuePolicy(policy);
  EXPECT_TRUE(p.ok());
  std::vector<uint32_t> order;
  OrderJobs(**p, jobs, &order);
  return order;
}

TEST(QueuePolicyTest, Orders) {
  std::vector<PendingJob> jobs(4);
  // id, priority, submit, time limit, attained service
  jobs[0] = {1, nullptr, 0, job::Tier::kGuaranteed, 0, 100, 50, 900, 1};
  jobs[1] = {2, nullptr, 5, job::Tier::kGuaranteed, 0, 200, 10, 100, 2};
  jobs[2] = {3, nullptr, 5, job::Tier::kGuaranteed, 0, 150, 0, 0, 3};
  jobs[3] = {4, nullptr, 0, job::Tier::kGuaranteed, 0, 100, 20, 500, 4};
  EXPECT_EQ(Order("priority", jobs), (std::vector<uint32_t>{2, 1, 0, 3}));
  EXPECT_EQ(Order("fifo", jobs), (std::vector<uint32_t>{0, 3, 2, 1}));
  EXPECT_EQ(Order("sjf", jobs), (std::vector<uint32_t>{1, 3, 0, 2}));
  EXPECT_EQ(Order("las", jobs), (std::vector<uint32_t>{2, 1, 3, 0}));
  // Gittins: the owner's rank, then submission.
  jobs[0].rank = 30;
  jobs[1].rank = 10;
  jobs[2].rank = 30;
  jobs[3].rank = 20;
  EXPECT_EQ(Order("gittins", jobs), (std::vector<uint32_t>{1, 3, 0, 2}));
}

TEST(QueuePolicyTest, UnknownNameListsTheKnownOnes) {
  auto p = MakeQueuePolicy("lottery");
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().message(),
            "unknown queue policy 'lottery'; choose one of: priority, fifo, sjf, las, gittins");
}

}  // namespace
}  // namespace hangar::sched::queue
