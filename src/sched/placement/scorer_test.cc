#include "sched/placement/scorer.h"

#include <gtest/gtest.h>

#include "sched/placement/gang_placer.h"
#include "sched/test_util.h"

namespace hangar::sched::placement {
namespace {

using cluster::ClusterUsage;
using cluster::GangAssignment;
using namespace sched::testing;

std::shared_ptr<const cluster::Topology> TwoNodes() {
  return Cluster(R"(
nodes:
  - {name: a, gpus: 4, gpu_model: T4, gpu_memory: 16Gi, cpu: 64, memory: 256Gi}
  - {name: b, gpus: 4, gpu_model: T4, gpu_memory: 16Gi, cpu: 64, memory: 256Gi}
)");
}

uint32_t PlaceWith(const std::string& policy, ClusterUsage& u, const GangRequest& r,
                   const WorkloadProfile* profile = nullptr, uint32_t* gpu = nullptr) {
  auto scorer = std::move(MakeScorer(policy)).value();
  GangPlacer placer;
  PlaceOptions o{scorer.get(), profile, nullptr, 7};
  PlaceResult res = placer.Place(u, r, o);
  EXPECT_TRUE(res.placed) << policy;
  if (gpu) *gpu = res.assignment.grants.empty() ? kNoGpu : res.assignment.grants[0].gpu;
  return res.assignment.tasks[0].node;
}

TEST(ScorerTest, EveryNamedPolicyExists) {
  for (auto name : ScorerNames()) {
    auto s = MakeScorer(name);
    ASSERT_TRUE(s.ok()) << name;
    EXPECT_EQ((*s)->name(), name);
  }
  EXPECT_FALSE(MakeScorer("tetris").ok());
}

TEST(ScorerTest, PackingPoliciesPreferTheFullerNode) {
  for (const char* policy : {"best-fit", "dot-product", "gpu-packing", "hangar"}) {
    auto t = TwoNodes();
    ClusterUsage u(t);
    // Make node b fuller.
    GangAssignment a;
    a.grants = {{4, 1000, 16 * 1024}};
    a.tasks = {{1, 0, 0, 1000, 1024, 0, 1}};
    ASSERT_TRUE(u.Allocate(a).ok());
    EXPECT_EQ(PlaceWith(policy, u, Whole(*t, 1, 1)), 1u) << policy;
  }
}

TEST(ScorerTest, GpuClusteringGroupsLikeWithLike) {
  auto t = TwoNodes();
  ClusterUsage u(t);
  // Node a holds a shared task, node b a 1-GPU task.
  GangAssignment shared;
  shared.grants = {{0, 500, 1024}};
  shared.tasks = {{0, 0, 0, 1000, 1024, 0, 1}};
  ASSERT_TRUE(u.Allocate(shared).ok());
  GangAssignment whole;
  whole.grants = {{4, 1000, 16 * 1024}};
  whole.tasks = {{1, 0, 0, 1000, 1024, 0, 1}};
  ASSERT_TRUE(u.Allocate(whole).ok());
  EXPECT_EQ(PlaceWith("gpu-clustering", u, Whole(*t, 1, 1)), 1u);
  EXPECT_EQ(PlaceWith("gpu-clustering", u, Shared(*t, 200, "1Gi")), 0u);
}

TEST(ScorerTest, FgdAvoidsLeavingUnusableSlivers) {
  auto t = TwoNodes();
  ClusterUsage u(t);
  // The workload is all half-GPU tasks. GPU 0 has 600 free, GPU 1 has 500 free.
  GangAssignment a;
  a.grants = {{0, 400, 1024}, {1, 500, 1024}};
  a.tasks = {{0, 0, 0, 0, 0, 0, 2}};
  ASSERT_TRUE(u.Allocate(a).ok());
  std::vector<WorkloadProfile::Count> counts = {{{0, 500, 1, cluster::kAnyModel, "", 0}, 1}};
  WorkloadProfile profile = WorkloadProfile::FromCounts(counts);
  // A 500 task on GPU 1 leaves 0 (no fragment); on GPU 0 it would leave a useless 100.
  uint32_t gpu = kNoGpu;
  EXPECT_EQ(PlaceWith("fgd", u, Shared(*t, 500, "1Gi"), &profile, &gpu), 0u);
  EXPECT_EQ(gpu, 1u);
  // Best fit also takes GPU 1 here (least free that fits).
  ClusterUsage u2(t);
  ASSERT_TRUE(u2.Allocate(a).ok());
  EXPECT_EQ(PlaceWith("best-fit", u2, Shared(*t, 500, "1Gi"), nullptr, &gpu), 0u);
  EXPECT_EQ(gpu, 1u);
}

TEST(ScorerTest, RandomIsDeterministicPerSeedAndSpreads) {
  auto t = Leaves(1, 8);
  std::set<uint32_t> nodes;
  for (uint64_t seed = 0; seed < 40; ++seed) {
    ClusterUsage u(t);
    auto scorer = std::move(MakeScorer("random")).value();
    GangPlacer placer;
    PlaceOptions o{scorer.get(), nullptr, nullptr, seed};
    auto r1 = placer.Place(u, Whole(*t, 1, 1), o);
    ClusterUsage u2(t);
    GangPlacer placer2;
    auto r2 = placer2.Place(u2, Whole(*t, 1, 1), o);
    ASSERT_TRUE(r1.placed && r2.placed);
    EXPECT_EQ(r1.assignment.tasks[0].node, r2.assignment.tasks[0].node);
    nodes.insert(r1.assignment.tasks[0].node);
  }
  EXPECT_GE(nodes.size(), 5u);
}

}  // namespace
}  // namespace hangar::sched::placement
