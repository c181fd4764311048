#include "controller/state/batch_gates.h"

#include <gtest/gtest.h>

namespace hangar::controller {
namespace {

TEST(BatchGatesTest, ArraysKeepTheirElementsUntilEveryOneIsForgotten) {
  BatchGates g;
  EXPECT_FALSE(g.has_arrays());
  g.NewArray(10, 2, 3);
  for (sched::JobId id : {10, 11, 12}) g.Add(10, id, 2);
  g.Add(20, 20, 0);  // a restore: the array made by its first element
  ASSERT_NE(g.FindArray(10), nullptr);
  EXPECT_EQ(g.FindArray(10)->elements, (std::vector<sched::JobId>{10, 11, 12}));
  EXPECT_EQ(g.FindArray(10)->max_running, 2);
  EXPECT_EQ(g.FindArray(11), nullptr) << "an element is not an array";
  g.ForgetElements({10, 20}, [](sched::JobId id) { return id == 11 || id == 20; });
  EXPECT_EQ(g.FindArray(10)->elements, (std::vector<sched::JobId>{10, 12}));
  EXPECT_EQ(g.FindArray(20), nullptr) << "an array with no element left is gone";
}

TEST(BatchGatesTest, CountsDependentsAndTheEarliestBegin) {
  BatchGates g;
  g.AddDependent();
  EXPECT_EQ(g.with_dependencies(), 1u);
  g.StartCount();
  g.AddDependent();
  g.GatedUntil(5'000);
  g.AddDependent();
  g.GatedUntil(3'000);
  EXPECT_EQ(g.with_dependencies(), 2u);
  EXPECT_FALSE(g.BeginCame(2'999));
  EXPECT_TRUE(g.BeginCame(3'000)) << "the earliest begin: time";
  EXPECT_FALSE(g.BeginCame(6'000)) << "told once; the next cycle counts again";
  g.StartCount();
  EXPECT_EQ(g.with_dependencies(), 0u);
}

}  // namespace
}  // namespace hangar::controller
