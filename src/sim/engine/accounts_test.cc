#include "sim/engine/accounts.h"

#include <gtest/gtest.h>

#include "job/queue_spec.h"
#include "sim/engine/sim_test_util.h"

namespace hangar::sim {
namespace {

TEST(AccountsTest, GpuTimeCountsWhatIsAllocatedBetweenInstants) {
  Accounts a(nullptr, 0);
  a.Reset(100);
  a.Allocate(2000);  // two GPUs
  a.Advance(110);    // 10 ms
  EXPECT_EQ(a.busy_gpu_ms(), 20);
  a.Advance(105);  // the past: nothing
  EXPECT_EQ(a.busy_gpu_ms(), 20);
  a.Free(1000);
  a.Advance(120);
  EXPECT_EQ(a.busy_gpu_ms(), 30);
  EXPECT_EQ(a.allocated_milli(), 1000);
  a.CountCycle();
  EXPECT_EQ(a.cycles(), 1);
  a.Reset(0);
  EXPECT_EQ(a.busy_gpu_ms(), 0);
  EXPECT_EQ(a.cycles(), 0);
}

TEST(AccountsTest, AQueueIsChargedAlongItsPathAndItsHistoryDecays) {
  auto topo = testing::OneNode(8);
  auto specs = job::ParseQueues(
      "queues:\n  - name: org\n    quota: {gpus: 8}\n    children:\n"
      "      - name: team\n        quota: {gpus: 4}\n",
      "queues.yaml");
  ASSERT_TRUE(specs.ok()) << specs.status().ToString();
  auto tree = sched::queue::QueueTree::Build(*specs, *topo);
  ASSERT_TRUE(tree.ok()) << tree.status().ToString();
  const int team = (*tree)->FindLeaf("team");
  ASSERT_GE(team, 0);
  const int org = (*tree)->nodes()[team].parent;
  ASSERT_GE(org, 0);
  Accounts a(tree->get(), kSecond);
  a.Reset(0);
  const std::vector<int64_t> two = (*tree)->Charge(*testing::Gpus(2), nullptr, *topo);
  a.Charge(static_cast<uint32_t>(team), two, Accounts::Charging::kAdd);
  EXPECT_EQ(a.usage()[team][sched::queue::kGpu], 2000);
  EXPECT_EQ(a.usage()[org][sched::queue::kGpu], 2000);  // its parent holds it too
  a.Advance(kSecond);                                   // one half-life
  EXPECT_EQ(a.queue_gpu_ms()[team], 2 * kSecond);
  EXPECT_DOUBLE_EQ(a.history()[team][sched::queue::kGpu], 1000.0);  // halfway to 2000
  a.Charge(static_cast<uint32_t>(team), two, Accounts::Charging::kRemove);
  EXPECT_EQ(a.usage()[org][sched::queue::kGpu], 0);
  a.Advance(2 * kSecond);
  EXPECT_DOUBLE_EQ(a.history()[team][sched::queue::kGpu], 500.0);  // and halves again, unused
}

}  // namespace
}  // namespace hangar::sim
