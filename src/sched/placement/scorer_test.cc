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

TEST(ScorerTest, HangarKeepsTheOnlyHostOfARareBigShapeFree) {
  // Node 0 is the only one with the 120 cores that a rare 8-GPU shape asks for; the other ten
  // have 64. The shape is too rare (2 in 102 tasks) to be in FGD's typical profile.
  std::string yaml =
      "nodes:\n  - {name: big, gpus: 8, gpu_model: T4, gpu_memory: 16Gi, cpu: 128, memory: "
      "512Gi}\n";
  for (int i = 0; i < 10; ++i) {
    yaml += "  - {name: n" + std::to_string(i) +
            ", gpus: 8, gpu_model: T4, gpu_memory: 16Gi, cpu: 64, memory: 512Gi}\n";
  }
  auto t = Cluster(yaml);
  std::vector<WorkloadProfile::Count> counts = {{{4000, 1000, 1, cluster::kAnyModel, "", 0}, 100},
                                                {{120000, 1000, 8, cluster::kAnyModel, "", 0}, 2}};
  WorkloadProfile profile = WorkloadProfile::FromCounts(counts);
  ASSERT_EQ(profile.tasks().size(), 1u);
  ASSERT_EQ(profile.rare_tasks().size(), 1u);
  EXPECT_NEAR(profile.milli_per_task(), (100.0 * 1000 + 2 * 8000) / 102, 1e-9);

  const GangRequest small = Gang(*t, "name: s\ntasks:\n  - gpus: 1\n    cpu: 4\n");
  // FGD sees ten equal nodes and the big one, and takes the first; Hangar keeps the big one.
  {
    ClusterUsage u(t);
    EXPECT_EQ(PlaceWith("fgd", u, small, &profile), 0u);
  }
  ClusterUsage u(t);
  EXPECT_NE(PlaceWith("hangar", u, small, &profile), 0u);
  // The rare shape then still finds its host.
  const GangRequest big = Gang(*t, "name: b\ntasks:\n  - gpus: 8\n    cpu: 120\n");
  EXPECT_EQ(PlaceWith("hangar", u, big, &profile), 0u);

  // When nothing else fits, the big node is used.
  ClusterUsage full(t);
  for (uint32_t n = 1; n <= 10; ++n) {
    GangAssignment a;
    for (uint32_t g = 0; g < 8; ++g) a.grants.push_back({n * 8 + g, 1000, 16 * 1024});
    a.tasks = {{n, 0, 0, 8000, 1024, 0, 8}};
    ASSERT_TRUE(full.Allocate(a).ok());
  }
  EXPECT_EQ(PlaceWith("hangar", full, small, &profile), 0u);
}

TEST(ScorerTest, HangarPricesGpuRemaindersOnlyWhileGpuIsWhatRunsOut) {
  // Workload: 500 and 300 milli tasks. A 300 pod on the fresh GPU 0 leaves 700 there; on GPU 1
  // (900 free) it leaves 600. Every task still fits either way, so FGD ties and takes GPU 0; but
  // 700 fills to 500+200 or 300+300+100 while 600 fills to 300+300, and Hangar's residue term
  // (term 1) takes GPU 1 -- while the node's CPU can feed its free GPU. When the tasks ask for 40
  // cores each, 62 free cores feed a third of the 1.9 free GPUs: CPU runs out first, GPU is left
  // over whatever the remainders, term 1 is off and Hangar ties like FGD.
  auto t = Cluster(R"(
nodes:
  - {name: a, gpus: 2, gpu_model: T4, gpu_memory: 16Gi, cpu: 64, memory: 256Gi}
)");
  auto profile = [](int64_t milli_cpu) {
    return WorkloadProfile::FromCounts({{{milli_cpu, 500, 1, cluster::kAnyModel, "", 0}, 1},
                                        {{milli_cpu, 300, 1, cluster::kAnyModel, "", 0}, 1}});
  };
  const WorkloadProfile light = profile(1000), heavy = profile(40000);
  GangAssignment used;
  used.grants = {{1, 100, 1024}};
  used.tasks = {{0, 0, 0, 1000, 1024, 0, 1}};
  for (auto [policy, p, want] : {std::tuple{"fgd", &light, 0u}, std::tuple{"hangar", &light, 1u},
                                 std::tuple{"fgd", &heavy, 0u}, std::tuple{"hangar", &heavy, 0u}}) {
    ClusterUsage u(t);
    ASSERT_TRUE(u.Allocate(used).ok());
    uint32_t gpu = kNoGpu;
    EXPECT_EQ(PlaceWith(policy, u, Shared(*t, 300, "1Gi"), p, &gpu), 0u);
    EXPECT_EQ(gpu, want) << policy << (p == &light ? " light" : " heavy");
  }
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
