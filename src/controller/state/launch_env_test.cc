#include "controller/state/launch_env.h"

#include <gtest/gtest.h>

#include "cluster/cluster_yaml.h"

namespace hangar::controller {
namespace {

TEST(LaunchEnvTest, TorchrunVariablesForATwoNodeGang) {
  auto f = cluster::ParseClusterYaml(
      "node_defaults: {gpus: 8, gpu_model: H100, gpu_memory: 80Gi, cpu: 64, memory: 512Gi}\n"
      "nodes: [{name: a}, {name: b}]\n", "c.yaml");
  ASSERT_TRUE(f.ok());
  const auto& t = *f->topology;
  auto spec = job::ParseJobSpec("name: g\ntasks:\n  - {replicas: 4, gpus: 4, env: {X: y}}\n", "j");
  ASSERT_TRUE(spec.ok());
  // Tasks 0,1 on node a (GPUs 0-3, 4-7), tasks 2,3 on node b.
  cluster::GangAssignment a;
  for (uint32_t k = 0; k < 4; ++k) {
    const uint32_t node = k / 2, first = t.nodes()[node].first_gpu + (k % 2) * 4;
    cluster::TaskPlacement task{node, 0, k, 0, 0, static_cast<uint32_t>(a.grants.size()), 0};
    for (uint32_t g = 0; g < 4; ++g) a.grants.push_back({first + g, 1000, 0});
    task.end_grant = static_cast<uint32_t>(a.grants.size());
    a.tasks.push_back(task);
  }
  LaunchContext ctx;
  ctx.job_id = 42;
  ctx.attempt = 1;
  ctx.restarts = 1;
  ctx.spec = &*spec;
  ctx.assignment = &a;
  ctx.topology = &t;
  ctx.address_of = [](uint32_t n) { return n == 0 ? "10.0.0.1" : "10.0.0.2"; };
  ctx.master_port = 29511;
  ctx.checkpoint_dir = "/ckpt/job-42";
  auto env = TaskEnvironments(ctx);
  ASSERT_EQ(env.size(), 4u);
  for (size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(env[i]["MASTER_ADDR"], "10.0.0.1");
    EXPECT_EQ(env[i]["MASTER_PORT"], "29511");
    EXPECT_EQ(env[i]["WORLD_SIZE"], "4");
    EXPECT_EQ(env[i]["RANK"], std::to_string(i));
    EXPECT_EQ(env[i]["NODE_RANK"], std::to_string(i / 2));
    EXPECT_EQ(env[i]["LOCAL_RANK"], std::to_string(i % 2));
    EXPECT_EQ(env[i]["LOCAL_WORLD_SIZE"], "2");
    EXPECT_EQ(env[i]["HANGAR_JOB_ID"], "42");
    EXPECT_EQ(env[i]["HANGAR_TASK_INDEX"], std::to_string(i));
    EXPECT_EQ(env[i]["HANGAR_RESTART_COUNT"], "1");
    EXPECT_EQ(env[i]["HANGAR_CHECKPOINT_DIR"], "/ckpt/job-42");
    EXPECT_EQ(env[i]["X"], "y");
  }
  EXPECT_EQ(env[0]["CUDA_VISIBLE_DEVICES"], "0,1,2,3");
  EXPECT_EQ(env[1]["CUDA_VISIBLE_DEVICES"], "4,5,6,7");
  EXPECT_EQ(env[3]["CUDA_VISIBLE_DEVICES"], "4,5,6,7");
}

}  // namespace
}  // namespace hangar::controller
