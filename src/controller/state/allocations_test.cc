#include "controller/state/allocations.h"

#include <gtest/gtest.h>

#include "cluster/cluster_yaml.h"

namespace hangar::controller {
namespace {

class AllocationsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto f = cluster::ParseClusterYaml(
        "node_defaults: {gpus: 8, gpu_model: H100, gpu_memory: 80Gi, cpu: 64, memory: 512Gi}\n"
        "nodes: [{name: \"n-[1-2]\"}]\n",
        "c.yaml");
    ASSERT_TRUE(f.ok());
    alloc_ = std::make_unique<Allocations>(f->topology);
  }
  // Four GPUs of node `node`, allocated.
  cluster::GangAssignment Take(uint32_t node) {
    cluster::GangAssignment a;
    cluster::TaskPlacement t;
    t.node = node;
    for (uint32_t g = 0; g < 4; ++g)
      a.grants.push_back({node * 8 + g, cluster::kMilliPerGpu, 0, -1, 0});
    t.first_grant = 0;
    t.end_grant = 4;
    a.tasks.push_back(t);
    EXPECT_TRUE(alloc_->usage().Allocate(a).ok());
    return a;
  }
  std::unique_ptr<Allocations> alloc_;
};

TEST_F(AllocationsTest, AStoppingTaskHoldsItsShareUntilItEnds) {
  alloc_->Stop("7.0.0", 0, Take(0));
  EXPECT_TRUE(alloc_->StoppingOn(0));
  EXPECT_FALSE(alloc_->StoppingOn(1));
  EXPECT_TRUE(alloc_->StoppingOf(7));
  EXPECT_FALSE(alloc_->StoppingOf(70)) << "job 70 is not job 7";
  EXPECT_EQ(alloc_->usage().gpu_free_milli(0), 0);
  EXPECT_EQ(alloc_->EndStopping(alloc_->stopping().find("7.0.0"), Allocations::ShareTo::kPool),
            "7.0.0");
  EXPECT_FALSE(alloc_->StoppingOn(0));
  EXPECT_EQ(alloc_->usage().gpu_free_milli(0), cluster::kMilliPerGpu) << "given back to the pool";
}

// A victim's tasks, held for the job that preempted it: what they free is kept for that job
// until it no longer waits, then given back.
TEST_F(AllocationsTest, WhatAVictimFreesIsKeptForItsPreemptor) {
  alloc_->Stop("7.0.0", 0, Take(0));
  alloc_->Stop("7.0.1", 1, Take(1));
  alloc_->Stop("70.0.0", 1, {});
  alloc_->HoldStopping(7, 9, /*except=*/1);
  EXPECT_EQ(alloc_->stopping().at("7.0.0").held_for, 9u);
  EXPECT_EQ(alloc_->stopping().at("7.0.1").held_for, 0u) << "on the node excepted";
  EXPECT_EQ(alloc_->stopping().at("70.0.0").held_for, 0u) << "job 70 is not job 7";
  alloc_->EndStopping(alloc_->stopping().find("7.0.0"), Allocations::ShareTo::kHolder);
  EXPECT_TRUE(alloc_->planned().holds(9));
  EXPECT_EQ(alloc_->usage().gpu_free_milli(0), 0) << "still allocated, to job 9";
  alloc_->ReleaseHolds([](sched::JobId) { return false; });
  EXPECT_FALSE(alloc_->planned().holds(9));
  EXPECT_EQ(alloc_->usage().gpu_free_milli(0), cluster::kMilliPerGpu);
}

}  // namespace
}  // namespace hangar::controller
