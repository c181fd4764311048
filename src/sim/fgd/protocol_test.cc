#include "sim/fgd/protocol.h"

#include <gtest/gtest.h>

#include <numeric>
#include <set>

#include "sim/fgd/cluster_frag.h"
#include "sim/fgd/reference.h"
#include "sim/fgd/run_plan.h"

namespace hangar::sim::fgd {
namespace {

const std::string kData = std::string(HANGAR_SOURCE_DIR) + "/data/traces/openb/";

// The default trace is read once for the whole test binary.
const OpenbTrace& DefaultTrace() {
  static const OpenbTrace trace = [] {
    auto t = LoadOpenbTrace(kData + "openb_node_list_gpu_node.csv",
                            kData + "openb_pod_list_default.csv");
    EXPECT_TRUE(t.ok()) << t.status().ToString();
    return t.ok() ? *t : OpenbTrace{};
  }();
  return trace;
}

std::vector<OpenbPod> SmallPods(const std::vector<int32_t>& milli,
                                const std::vector<int32_t>& num) {
  std::vector<OpenbPod> pods;
  for (size_t i = 0; i < milli.size(); ++i) {
    OpenbPod p;
    p.name = "p" + std::to_string(i);
    p.milli_cpu = 1000;
    p.num_gpu = num[i];
    p.gpu_milli = num[i] > 0 ? milli[i] : 0;
    pods.push_back(p);
  }
  return pods;
}

TEST(ProtocolTest, DefaultTraceIsTheOpenbCluster) {
  const OpenbTrace& t = DefaultTrace();
  EXPECT_EQ(t.workload, "openb_pod_list_default");
  EXPECT_EQ(t.nodes.size(), 1213u);
  EXPECT_EQ(t.capacity_milli(), 6'212'000);
  ASSERT_EQ(t.pods.size(), 8152u);
  int64_t total = 0;
  for (const auto& p : t.pods) total += p.TotalMilliGpu();
  EXPECT_EQ(total, 6'086'800);
}

TEST(ProtocolTest, TuneUpAppendsClonesUntilTheTarget) {
  const OpenbTrace& t = DefaultTrace();
  const RunPlan plan = DrawRunPlan(t.pods, 1213, t.capacity_milli(), 42, 1.3);
  // The originals first, each exactly once, shuffled.
  std::vector<int32_t> head(plan.arrivals.begin(), plan.arrivals.begin() + 8152);
  std::vector<int32_t> sorted = head;
  std::sort(sorted.begin(), sorted.end());
  for (int32_t i = 0; i < 8152; ++i) ASSERT_EQ(sorted[i], i);
  EXPECT_NE(head, sorted);
  int64_t total = 0;
  for (int32_t k : plan.arrivals) total += t.pods[k].TotalMilliGpu();
  EXPECT_LE(total, 8'075'600 + 7'000);  // a multi-GPU clone may overshoot by its extra GPUs
  EXPECT_GT(total, 8'075'600 - 8'000);
  EXPECT_GE(plan.arrivals.size(), 10'766u);  // the protocol's range for default
  EXPECT_LE(plan.arrivals.size(), 10'866u);
  std::vector<int32_t> p = plan.node_priority;
  std::sort(p.begin(), p.end());
  for (int32_t i = 0; i < 1213; ++i) ASSERT_EQ(p[i], i);
}

TEST(ProtocolTest, TuneDownDropsPodsUntilTheTargetHolds) {
  // 4 GPUs of capacity, 6 whole-GPU pods: 1.0 x capacity keeps 4 of them.
  const auto pods = SmallPods({1000, 1000, 1000, 1000, 1000, 1000}, {1, 1, 1, 1, 1, 1});
  const RunPlan plan = DrawRunPlan(pods, 2, 4000, 7, 1.0);
  EXPECT_EQ(plan.arrivals.size(), 4u);
  EXPECT_EQ(std::set<int32_t>(plan.arrivals.begin(), plan.arrivals.end()).size(), 4u);
  // No tuning at all when tune <= 0.
  EXPECT_EQ(DrawRunPlan(pods, 2, 4000, 7, 0).arrivals.size(), 6u);
}

TEST(ProtocolTest, PriorityClusterPutsTheSmallestPriorityFirst) {
  const OpenbTrace& t = DefaultTrace();
  std::vector<int32_t> priority(t.nodes.size());
  std::iota(priority.rbegin(), priority.rend(), 0);  // the last node by name goes first
  auto topo = BuildPriorityCluster(t.nodes, priority);
  ASSERT_TRUE(topo.ok()) << topo.status().ToString();
  EXPECT_EQ((*topo)->nodes().front().name, t.nodes.back().name);
  EXPECT_EQ((*topo)->nodes().back().name, t.nodes.front().name);
  EXPECT_EQ((*topo)->total_gpus(), 6212);
  EXPECT_EQ((*topo)->leaves().size(), 1u);
}

TEST(ProtocolTest, TypicalPodsOfTheDefaultTrace) {
  const OpenbTrace& t = DefaultTrace();
  std::vector<int32_t> priority(t.nodes.size());
  std::iota(priority.begin(), priority.end(), 0);
  auto topo = BuildPriorityCluster(t.nodes, priority);
  ASSERT_TRUE(topo.ok());
  const sched::WorkloadProfile profile = TypicalPods(t.pods, **topo);
  EXPECT_EQ(profile.tasks().size(), 35u);  // PROTOCOL.md: 35 of 91 specs
  double weight = 0, cpu_only = 0;
  for (const auto& task : profile.tasks()) {
    weight += task.weight;
    if (task.milli == 0) cpu_only += task.weight;
  }
  EXPECT_NEAR(weight, 1.0, 1e-12);
  EXPECT_NEAR(cpu_only, 0.136, 0.0005);
}

TEST(ProtocolTest, IncrementalFragmentationEqualsAFreshMeasurement) {
  const OpenbTrace& t = DefaultTrace();
  const RunPlan plan = DrawRunPlan(t.pods, 1213, t.capacity_milli(), 43, 1.3);
  auto topo = BuildPriorityCluster(t.nodes, plan.node_priority);
  ASSERT_TRUE(topo.ok());
  const sched::WorkloadProfile profile = TypicalPods(t.pods, **topo);
  cluster::ClusterUsage usage(*topo);
  ClusterFragmentation frag(usage, profile);
  // Whole-GPU pods on the first nodes that have room, bypassing the scheduler.
  for (uint32_t n = 0; n < 40; ++n) {
    cluster::GangAssignment a;
    a.grants = {{(*topo)->nodes()[n].first_gpu, 1000, 0}};
    a.tasks = {{n, 0, 0, 500, 1024, 0, 1}};
    ASSERT_TRUE(usage.Allocate(a).ok());
    frag.Update(usage, n);
  }
  ClusterFragmentation fresh(usage, profile);
  EXPECT_EQ(frag.total_milli(), fresh.total_milli());
  EXPECT_GT(frag.total_milli(), 0);
}

// Reference rows for one policy and seed (a filtered copy of the published CSVs).
ReferenceRun PublishedRun(std::string_view policy, int64_t seed) {
  auto ref = LoadReference(kData + "fgd_reference_subset", "openb_pod_list_default", policy);
  EXPECT_TRUE(ref.ok()) << ref.status().ToString();
  for (const auto& r : ref->runs) {
    if (r.seed == seed) return r;
  }
  ADD_FAILURE() << "no published run for seed " << seed;
  return {};
}

void ExpectSameColumns(const Curve& ours, const Curve& published, const std::string& what) {
  for (int k = 0; k < kColumns; ++k) {
    ASSERT_EQ(ours[k].has_value(), published[k].has_value()) << what << " column " << k;
    if (ours[k]) {
      EXPECT_DOUBLE_EQ(*ours[k], *published[k]) << what << " column " << k;
    }
  }
}

// The fidelity check: every published column 0..130 of allocation and fragmentation,
// reproduced exactly (to the two decimals the CSVs carry).
TEST(ProtocolFidelityTest, BestFitAndFgdReproduceThePublishedColumnsForSeed42) {
  for (auto [ours, theirs] : {std::pair{"best-fit", "05-BestFit"}, std::pair{"fgd", "06-FGD"}}) {
    auto run = RunProtocol(DefaultTrace(), RunOptions{ours, 42, 1.3});
    ASSERT_TRUE(run.ok()) << run.status().ToString();
    const ReferenceRun published = PublishedRun(theirs, 42);
    ExpectSameColumns(run->alloc, published.alloc, std::string(ours) + " alloc");
    ExpectSameColumns(run->frag, published.frag, std::string(ours) + " frag");
  }
}

TEST(ProtocolTest, UnknownPolicyFails) {
  auto run = RunProtocol(DefaultTrace(), RunOptions{"tetris", 42, 1.3});
  ASSERT_FALSE(run.ok());
  EXPECT_NE(run.status().message().find("tetris"), std::string::npos);
}

}  // namespace
}  // namespace hangar::sim::fgd
