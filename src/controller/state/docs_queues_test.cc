// docs/queues.md's example queues file, applied to `hangar dev`'s cluster, takes every shipped
// example job and lets each run (a doc example that does not run is a failing test).
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "cluster/cluster_yaml.h"
#include "controller/state/cluster_state.h"

namespace hangar::controller {
namespace {

std::string DocsQueuesFile() {
  std::ifstream in(std::string(HANGAR_SOURCE_DIR) + "/docs/queues.md");
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string md = ss.str();
  const size_t start = md.find("```yaml\n");
  if (start == std::string::npos) return "";
  const size_t body = start + 8;
  return md.substr(body, md.find("```", body) - body);
}

TEST(DocsQueuesTest, TheExampleKeepsDefaultAndRunsEveryShippedExample) {
  auto cluster =
      cluster::LoadClusterFile(std::string(HANGAR_SOURCE_DIR) + "/examples/clusters/dev-4x8.yaml");
  ASSERT_TRUE(cluster.ok()) << cluster.status().ToString();
  ControllerOptions o;
  o.require_validation = false;
  ClusterState state(cluster->topology, o, sched::Scheduler::Create({}).value());
  auto specs = job::ParseQueues(DocsQueuesFile(), "docs/queues.md");
  ASSERT_TRUE(specs.ok()) << specs.status().ToString();
  Effects fx;
  nlohmann::json summary;
  ASSERT_TRUE(state.ApplyQueues(*specs, 1, &fx, &summary).ok());
  EXPECT_EQ(summary["removed"], nlohmann::json::array()) << summary.dump();
  for (const auto& node : cluster->topology->nodes()) {
    pb::Register r;
    r.mutable_inventory()->set_node(node.name);
    for (uint32_t i = 0; i < node.num_gpus; ++i) r.mutable_inventory()->add_gpus()->set_index(i);
    ASSERT_TRUE(state.OnRegister(r, 2, &fx).ok());
  }
  // The largest first: pretrain-4x8 takes all 32 GPUs, so no guarantee may be held back from it.
  uint64_t next = 1;
  for (const char* name :
       {"pretrain-4x8.yaml", "finetune-8gpu.yaml", "inference-fractional.yaml", "notebook.yaml"}) {
    auto spec = job::LoadJobFile(std::string(HANGAR_SOURCE_DIR) + "/examples/jobs/" + name);
    ASSERT_TRUE(spec.ok()) << name << ": " << spec.status().ToString();
    auto id = state.Submit(*spec, 3, &fx);
    ASSERT_TRUE(id.ok()) << name << ": " << id.status().ToString();
    EXPECT_EQ(*id, next++);
  }
  Effects cycle;
  state.Schedule(4, &cycle);
  auto pretrain = state.GetJob(1);
  EXPECT_EQ(pretrain->state, "starting") << pretrain->reason;
  for (uint64_t id = 2; id < next; ++id) {
    auto j = state.GetJob(id);
    // The rest wait for what pretrain holds, not on a queue that refuses them.
    EXPECT_EQ(j->state, "pending");
    // (With every GPU taken the cycle stops early: "no free capacity was left for it".)
    EXPECT_TRUE(j->reason.find("(the rest is in use") != std::string::npos ||
                j->reason.find("no free capacity was left for it") != std::string::npos)
        << j->reason;
  }
  // pretrain ends; the other three then start together.
  for (const auto& t : pretrain->task_views) {
    pb::TaskStatus s;
    s.set_task_id("1.0." + std::to_string(t.index));
    s.set_state(pb::TaskStatus::EXITED);
    ASSERT_TRUE(state.OnTaskStatus(t.node, s, 5, &fx).ok());
  }
  EXPECT_EQ(state.GetJob(1)->state, "succeeded");
  Effects again;
  state.Schedule(6, &again);
  for (uint64_t id = 2; id < next; ++id)
    EXPECT_EQ(state.GetJob(id)->state, "starting") << state.GetJob(id)->reason;
}

// Its `ops` queue takes jobs that run as root; `default` refuses them (docs/rbac.md).
TEST(DocsQueuesTest, TheExampleAllowsRootInOpsOnly) {
  auto cluster =
      cluster::LoadClusterFile(std::string(HANGAR_SOURCE_DIR) + "/examples/clusters/dev-4x8.yaml");
  ASSERT_TRUE(cluster.ok());
  ControllerOptions o;
  o.require_validation = false;
  ClusterState state(cluster->topology, o, sched::Scheduler::Create({}).value());
  auto specs = job::ParseQueues(DocsQueuesFile(), "docs/queues.md");
  ASSERT_TRUE(specs.ok()) << specs.status().ToString();
  Effects fx;
  nlohmann::json summary;
  ASSERT_TRUE(state.ApplyQueues(*specs, 1, &fx, &summary).ok());
  auto spec = job::ParseJobSpec("name: fix\ntasks: [{gpus: 1, command: [x]}]\n", "job.yaml");
  ASSERT_TRUE(spec.ok());
  spec->user = "ops";
  spec->run_as.uid = 0;
  EXPECT_EQ(state.Submit(*spec, 2, &fx).status().code(), StatusCode::kPermissionDenied);
  spec->queue = "ops";
  EXPECT_TRUE(state.Submit(*spec, 2, &fx).ok());
}

}  // namespace
}  // namespace hangar::controller
