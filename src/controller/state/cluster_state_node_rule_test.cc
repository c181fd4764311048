// include_nodes / exclude_nodes through the controller: submission checks the names, the cycle
// keeps an excluded node unused however free it is, and the job's reason names the rule.
#include <gtest/gtest.h>

#include <set>

#include "cluster/cluster_yaml.h"
#include "controller/state/cluster_state.h"

namespace hangar::controller {
namespace {

class NodeRuleStateTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto f = cluster::ParseClusterYaml(
        "node_defaults: {gpus: 8, gpu_model: H100, gpu_memory: 80Gi, cpu: 64, memory: 512Gi}\n"
        "nodes: [{name: 'gpu-[1-3]'}]\n",
        "c.yaml");
    ASSERT_TRUE(f.ok());
    ControllerOptions o;
    o.require_validation = false;
    state_ = std::make_unique<ClusterState>(f->topology, o, sched::Scheduler::Create({}).value());
    for (const char* n : {"gpu-1", "gpu-2", "gpu-3"}) {
      pb::Register r;
      r.mutable_inventory()->set_node(n);
      for (int i = 0; i < 8; ++i) r.mutable_inventory()->add_gpus()->set_index(i);
      Effects fx;
      ASSERT_TRUE(state_->OnRegister(r, 0, &fx).ok());
    }
  }
  StatusOr<sched::JobId> Submit(const std::string& yaml) {
    auto spec = job::ParseJobSpec(yaml, "job.yaml");
    EXPECT_TRUE(spec.ok()) << spec.status().message();
    Effects fx;
    return state_->Submit(*spec, 1, &fx);
  }
  std::set<std::string> NodesOf(sched::JobId id) {
    std::set<std::string> out;
    const auto job = state_->GetJob(id);
    if (!job.ok()) return out;
    const api::JobView& view = *job;
    for (const auto& t : view.task_views) out.insert(t.node);
    return out;
  }
  std::unique_ptr<ClusterState> state_;
};

TEST_F(NodeRuleStateTest, AnExcludedNodeStaysUnusedAndTheWaitingJobNamesTheRule) {
  // Two whole-node jobs that may not use gpu-1: they take gpu-2 and gpu-3, and a third waits
  // with gpu-1 entirely free.
  const std::string job = "name: off\nexclude_nodes: gpu-1\ntasks: [{gpus: 8, command: [x]}]\n";
  auto a = Submit(job), b = Submit(job), c = Submit(job);
  ASSERT_TRUE(a.ok() && b.ok() && c.ok());
  Effects fx;
  state_->Schedule(2, &fx);
  EXPECT_EQ(state_->GetJob(*a)->state, "starting");
  EXPECT_EQ(state_->GetJob(*b)->state, "starting");
  std::set<std::string> used = NodesOf(*a);
  used.merge(NodesOf(*b));
  EXPECT_EQ(used, (std::set<std::string>{"gpu-2", "gpu-3"}));
  const auto waiting = state_->GetJob(*c);
  EXPECT_EQ(waiting->state, "pending");
  EXPECT_EQ(waiting->reason_rule, "exclude-nodes");
  EXPECT_NE(waiting->reason.find("its exclude_nodes keeps it off 1 node that has room for it now"),
            std::string::npos)
      << waiting->reason;
  EXPECT_EQ(state_->GetNode("gpu-1")->gpus_free, 8);
  // A job without the rule takes gpu-1 at once.
  auto d = Submit("name: any\ntasks: [{gpus: 8, command: [x]}]\n");
  ASSERT_TRUE(d.ok());
  state_->Schedule(3, &fx);
  EXPECT_EQ(NodesOf(*d), (std::set<std::string>{"gpu-1"}));
}

TEST_F(NodeRuleStateTest, IncludedNodesHoldTheJobAndUnknownNamesAreRefused) {
  auto a =
      Submit("name: on\ninclude_nodes: gpu-[1,3]\ntasks: [{replicas: 2, gpus: 1, command: [x]}]\n");
  ASSERT_TRUE(a.ok()) << a.status().message();
  Effects fx;
  state_->Schedule(2, &fx);
  EXPECT_EQ(NodesOf(*a), (std::set<std::string>{"gpu-1", "gpu-3"}));
  auto bad = Submit("name: typo\nexclude_nodes: gpu-[3-5]\ntasks: [{gpus: 1, command: [x]}]\n");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(bad.status().message(),
            "exclude_nodes names gpu-[4-5], not a node of this cluster; the nodes are: gpu-[1-3]");
}

}  // namespace
}  // namespace hangar::controller
