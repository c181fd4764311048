#include "sim/engine/mig_reshapes.h"

#include <gtest/gtest.h>

#include "sim/engine/sim_test_util.h"

namespace hangar::sim {
namespace {

TEST(MigReshapesTest, AReCutGpuTakesItsLayoutAtOnceAndWorkOnlyWhenTheReshapeIsDone) {
  auto topo = testing::OneNode(2, /*mig=*/true);
  cluster::ClusterUsage usage(topo);
  cluster::MigLayout whole, halves;
  ASSERT_TRUE(whole.Add(cluster::MigShape::k7g, 0));
  ASSERT_TRUE(halves.Add(cluster::MigShape::k3g, 0));
  ASSERT_TRUE(halves.Add(cluster::MigShape::k3g, 4));
  usage.SetMigLayout(1, whole);
  MigReshapes r(5 * kSecond);
  EXPECT_EQ(r.NextDone(), kNever);
  r.Start(10 * kSecond, {1, whole, halves, 42}, usage);
  EXPECT_TRUE(usage.gpu_mig_reshaping(1));
  EXPECT_EQ(r.NextDone(), 15 * kSecond);
  EXPECT_EQ(r.stats().reshapes, 1);
  EXPECT_EQ(r.stats().instances_created, 2);
  EXPECT_EQ(r.stats().instances_destroyed, 1);
  r.Finish(14 * kSecond, usage);
  EXPECT_TRUE(usage.gpu_mig_reshaping(1));
  r.Finish(15 * kSecond, usage);
  EXPECT_FALSE(usage.gpu_mig_reshaping(1));
  EXPECT_EQ(r.NextDone(), kNever);
}

}  // namespace
}  // namespace hangar::sim
