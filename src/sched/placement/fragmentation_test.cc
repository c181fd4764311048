#include "sched/placement/fragmentation.h"

#include <gtest/gtest.h>

namespace hangar::sched {
namespace {

WorkloadProfile HalfGpuAndCpuOnly() {
  std::vector<WorkloadProfile::Count> counts;
  TypicalTask half{1000, 500, 1, cluster::kAnyModel, "", 0};
  TypicalTask cpu{1000, 0, 0, cluster::kAnyModel, "", 0};
  counts.push_back({half, 50});
  counts.push_back({cpu, 50});
  return WorkloadProfile::FromCounts(counts, 0.95);
}

TEST(FragmentationTest, HandWorkedNode) {
  WorkloadProfile p = HalfGpuAndCpuOnly();
  ASSERT_EQ(p.tasks().size(), 2u);
  EXPECT_DOUBLE_EQ(p.tasks()[0].weight, 0.5);
  std::vector<int32_t> free = {300, 1000};
  // The half-GPU task fits (on the free GPU): only the 300 it cannot use is fragment. The
  // CPU-only task cannot use any GPU: all 1300 idle milli-GPU count.
  EXPECT_DOUBLE_EQ(NodeFragmentation(p, {4000, true, 0, free}), 0.5 * 300 + 0.5 * 1300);
  // Without CPU the half-GPU task cannot run at all: everything idle is fragment for both.
  EXPECT_DOUBLE_EQ(NodeFragmentation(p, {500, true, 0, free}), 1300);
  // A model the task may not use.
  std::vector<WorkloadProfile::Count> counts = {
      {{1000, 500, 1, cluster::ModelMask{2}, "m1", 0}, 1}};
  WorkloadProfile other = WorkloadProfile::FromCounts(counts);
  EXPECT_DOUBLE_EQ(NodeFragmentation(other, {4000, true, 0, free}), 1300);
  EXPECT_DOUBLE_EQ(NodeFragmentation(other, {4000, true, 1, free}), 300);
}

TEST(FragmentationTest, KeepsTheShapesThatCoverTheWorkload) {
  std::vector<WorkloadProfile::Count> counts;
  for (int i = 0; i < 10; ++i)
    counts.push_back({{1000 * i, 1000, 1, cluster::kAnyModel, "", 0}, 10 - i});
  // Counts 10,9,...,1 (55 in all): 95% is 52.25, reached after 8 shapes (10+...+3 = 52) plus one.
  WorkloadProfile p = WorkloadProfile::FromCounts(counts, 0.95);
  EXPECT_EQ(p.tasks().size(), 9u);
  double sum = 0;
  for (const auto& t : p.tasks()) sum += t.weight;
  EXPECT_NEAR(sum, 1.0, 1e-12);
  EXPECT_EQ(p.tasks()[0].milli_cpu, 0);
  EXPECT_NE(WorkloadProfile::FromCounts(counts).id(), p.id());
}

}  // namespace
}  // namespace hangar::sched
