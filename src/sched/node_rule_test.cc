#include "sched/node_rule.h"

#include <gtest/gtest.h>

#include <set>

#include "sched/placement/gang_placer.h"
#include "sched/test_util.h"

namespace hangar::sched {
namespace {

using cluster::ClusterUsage;
using namespace sched::testing;
using placement::PlaceOptions;
using placement::PlaceResult;

constexpr const char* kFour =
    "node_defaults: {gpus: 8, gpu_model: H100, gpu_memory: 80Gi, cpu: 64, memory: 512Gi}\n"
    "nodes: [{name: 'gpu-[1-4]'}]\n";

std::string Job(const std::string& rules, int replicas, int gpus) {
  return "name: j\n" + rules + "tasks: [{replicas: " + std::to_string(replicas) +
         ", gpus: " + std::to_string(gpus) + ", command: [x]}]\n";
}

// Takes `gpus` GPUs on node n directly, to set up a state.
void Occupy(ClusterUsage& u, uint32_t n, int gpus) {
  cluster::GangAssignment a;
  const auto& node = u.topology().nodes()[n];
  for (int i = 0; i < gpus; ++i)
    a.grants.push_back({node.first_gpu + i, 1000, node.gpu_memory_mib});
  a.tasks.push_back({n, 0, 0, 0, 0, 0, static_cast<uint32_t>(gpus)});
  ASSERT_TRUE(u.Allocate(a).ok());
}

std::set<std::string> NodesOf(const cluster::Topology& t, const PlaceResult& r) {
  std::set<std::string> out;
  for (const auto& task : r.assignment.tasks) out.insert(t.nodes()[task.node].name);
  return out;
}

class NodeRuleTest : public ::testing::Test {
 protected:
  PlaceResult Place(ClusterUsage& u, const GangRequest& r) {
    return placer_.Place(u, r, PlaceOptions{scorer_.get(), nullptr, nullptr, 1});
  }
  Reason Why(const ClusterUsage& u, const GangRequest& r) {
    return placement::ExplainNotNow(u, r, PlaceOptions{scorer_.get(), nullptr, nullptr, 1});
  }
  std::shared_ptr<const cluster::Topology> t_ = Cluster(kFour);
  std::unique_ptr<placement::NodeScorer> scorer_ =
      std::move(placement::MakeScorer("hangar")).value();
  placement::GangPlacer placer_;
};

TEST_F(NodeRuleTest, CompilesNamesToIndicesAndRefusesWhatTheClusterLacks) {
  job::NodeListSpec spec;
  spec.include = {"gpu-3", "gpu-1"};
  spec.exclude = {"gpu-4"};
  NodeRule rule = CompileNodeRule(spec, *t_);
  EXPECT_EQ(rule.required, (std::vector<uint32_t>{0, 2}));
  EXPECT_EQ(rule.excluded, (std::vector<uint32_t>{3}));
  EXPECT_EQ(NodeNames(*t_, rule.required), "gpu-[1,3]");
  EXPECT_TRUE(CheckNodeNames(spec, *t_).ok());
  spec.exclude = {"gpu-4", "gpu-7", "gpu-8"};
  const Status s = CheckNodeNames(spec, *t_);
  EXPECT_EQ(s.message(),
            "exclude_nodes names gpu-[7-8], not a node of this cluster; the nodes are: gpu-[1-4]");
  // A stored job still compiles: an unknown excluded node is moot, an unknown included one
  // makes the job "never".
  EXPECT_EQ(CompileNodeRule(spec, *t_).excluded, (std::vector<uint32_t>{3}));
  spec.include = {"gpu-9"};
  EXPECT_TRUE(CompileNodeRule(spec, *t_).required_missing);
  auto spec2 = job::ParseJobSpec(Job("include_nodes: gpu-9\n", 1, 1), "j.yaml");
  ASSERT_TRUE(spec2.ok());
  auto req = CompileGang(*spec2, *t_);
  ASSERT_TRUE(req.ok());
  EXPECT_EQ(placement::CheckNever(*t_, *req).ToString(*t_),
            "never: its include_nodes names a node this cluster does not have");
  // More named nodes than replicas is refused in the job file, on any cluster.
  auto three = job::ParseJobSpec(Job("include_nodes: gpu-[1-3]\n", 2, 1), "j.yaml");
  ASSERT_FALSE(three.ok());
  EXPECT_NE(three.status().message().find("include_nodes names 3 nodes but the job has 2 replicas"),
            std::string::npos)
      << three.status().message();
}

TEST_F(NodeRuleTest, TheRulesChangeTheFingerprintSoNoCacheConfusesThem) {
  const GangRequest plain = Gang(*t_, Job("", 1, 8));
  const GangRequest off = Gang(*t_, Job("exclude_nodes: gpu-1\n", 1, 8));
  const GangRequest on = Gang(*t_, Job("include_nodes: gpu-1\n", 1, 8));
  EXPECT_NE(plain.fingerprint, off.fingerprint);
  EXPECT_NE(plain.fingerprint, on.fingerprint);
  EXPECT_NE(off.fingerprint, on.fingerprint);
  EXPECT_FALSE(SamePlacement(plain, off));
  EXPECT_FALSE(SamePlacement(plain, on));
  EXPECT_TRUE(SamePlacement(off, Gang(*t_, Job("exclude_nodes: [gpu-1]\n", 1, 8))));
}

TEST_F(NodeRuleTest, AnExcludedNodeIsNeverUsedAndExplainNamesTheRule) {
  ClusterUsage u(t_);
  // The placer packs: gpu-1 has the fewest free GPUs, so without the rule it would go there.
  Occupy(u, 0, 4);
  const GangRequest off = Gang(*t_, Job("exclude_nodes: gpu-[1-3]\n", 1, 4));
  auto r = Place(u, off);
  ASSERT_TRUE(r.placed);
  EXPECT_EQ(NodesOf(*t_, r), (std::set<std::string>{"gpu-4"}));
  // gpu-4 now has 4 free; 8 more GPUs fit only on excluded nodes.
  const GangRequest eight = Gang(*t_, Job("exclude_nodes: gpu-[1-3]\n", 1, 8));
  EXPECT_FALSE(Place(u, eight).placed);
  const Reason why = Why(u, eight);
  EXPECT_EQ(why.rule, Rule::kNotNowExcludedNodes);
  EXPECT_EQ(why.ToString(*t_),
            "its exclude_nodes keeps it off 2 nodes that have room for it now; the other nodes fit "
            "0 of its 1 replicas");
  EXPECT_EQ(why.RuleName(), "exclude-nodes");
  // Every node excluded: never, with the rule named.
  const Reason never =
      placement::CheckNever(*t_, Gang(*t_, Job("exclude_nodes: gpu-[1-4]\n", 1, 1)));
  EXPECT_EQ(never.rule, Rule::kNeverExcludedNodes);
  EXPECT_TRUE(never.IsNever());
  // Too few nodes left for the gang: never, as the cluster's size.
  EXPECT_EQ(placement::CheckNever(*t_, Gang(*t_, Job("exclude_nodes: gpu-[1-2]\n", 3, 8))).rule,
            Rule::kNeverCluster);
  EXPECT_EQ(placement::CheckNever(*t_, Gang(*t_, Job("exclude_nodes: gpu-[1-2]\n", 2, 8))).rule,
            Rule::kNone);
}

TEST_F(NodeRuleTest, IncludedNodesAreAllInTheAllocation) {
  ClusterUsage u(t_);
  // Two one-GPU replicas would share one node; the rule spreads them onto the two it names.
  auto r = Place(u, Gang(*t_, Job("include_nodes: gpu-[2,4]\n", 2, 1)));
  ASSERT_TRUE(r.placed);
  EXPECT_EQ(NodesOf(*t_, r), (std::set<std::string>{"gpu-2", "gpu-4"}));
  // More replicas than named nodes: the named ones are in it, the rest go where they fit.
  r = Place(u, Gang(*t_, Job("include_nodes: gpu-3\nexclude_nodes: gpu-[1-2]\n", 3, 4)));
  ASSERT_TRUE(r.placed);
  EXPECT_TRUE(NodesOf(*t_, r).count("gpu-3"));
  EXPECT_FALSE(NodesOf(*t_, r).count("gpu-1") || NodesOf(*t_, r).count("gpu-2"));
}

TEST_F(NodeRuleTest, ABusyIncludedNodeKeepsTheJobWaitingAndExplainNamesIt) {
  ClusterUsage u(t_);
  Occupy(u, 1, 6);
  const GangRequest req = Gang(*t_, Job("include_nodes: gpu-[1-2]\n", 2, 4));
  const uint32_t before = static_cast<uint32_t>(u.TotalFreeWholeGpus());
  EXPECT_FALSE(Place(u, req).placed);
  EXPECT_EQ(u.TotalFreeWholeGpus(), before);  // nothing half-placed
  const Reason why = Why(u, req);
  EXPECT_EQ(why.rule, Rule::kNotNowIncludedNode);
  EXPECT_EQ(
      why.ToString(*t_),
      "its include_nodes names gpu-2, which has no room for a replica of it now (2 GPUs free)");
  // A named node that could never hold a replica: never, naming it.
  auto small = Cluster(
      "nodes: [{name: big, gpus: 8, gpu_model: H100, gpu_memory: 80Gi, cpu: 64, memory: 512Gi},"
      " {name: small, gpus: 2, gpu_model: H100, gpu_memory: 80Gi, cpu: 64, memory: 512Gi}]\n");
  const Reason never =
      placement::CheckNever(*small, Gang(*small, Job("include_nodes: [big, small]\n", 2, 4)));
  EXPECT_EQ(never.rule, Rule::kNeverIncludedNode);
  EXPECT_EQ(never.ToString(*small),
            "never: its include_nodes names small, which cannot hold a replica of it even when "
            "empty (its GPUs, "
            "CPU, memory or labels fall short)");
}

}  // namespace
}  // namespace hangar::sched
