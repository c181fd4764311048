#include "controller/state/launch_env.h"

#include <gtest/gtest.h>

#include "cluster/cluster_yaml.h"

namespace hangar::controller {
namespace {

TEST(LaunchEnvTest, TorchrunVariablesForATwoNodeGang) {
  auto f = cluster::ParseClusterYaml(
      "node_defaults: {gpus: 8, gpu_model: H100, gpu_memory: 80Gi, cpu: 64, memory: 512Gi}\n"
      "nodes: [{name: a}, {name: b}]\n",
      "c.yaml");
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
    EXPECT_EQ(env[i]["HANGAR_JOB_NODES"], "a,b") << "the job's nodes, in Slurm's host list form";
    EXPECT_EQ(env[i]["LOCAL_RANK"], std::to_string(i % 2));
    EXPECT_EQ(env[i]["LOCAL_WORLD_SIZE"], "2");
    EXPECT_EQ(env[i]["HANGAR_JOB_ID"], "42");
    EXPECT_EQ(env[i]["HANGAR_TASK_INDEX"], std::to_string(i));
    EXPECT_EQ(env[i]["HANGAR_RESTART_COUNT"], "1");
    EXPECT_EQ(env[i]["HANGAR_CHECKPOINT_DIR"], "/ckpt/job-42");
    EXPECT_EQ(env[i]["X"], "y");
    // torchrun's own variables: each task is one torchrun node running one worker per GPU.
    EXPECT_EQ(env[i]["PET_NNODES"], "4");
    EXPECT_EQ(env[i]["PET_NODE_RANK"], std::to_string(i));
    EXPECT_EQ(env[i]["PET_MASTER_ADDR"], "10.0.0.1");
    EXPECT_EQ(env[i]["PET_MASTER_PORT"], "29511");
    EXPECT_EQ(env[i]["PET_NPROC_PER_NODE"], "4");
  }
  EXPECT_EQ(env[0]["CUDA_VISIBLE_DEVICES"], "0,1,2,3");
  EXPECT_EQ(env[1]["CUDA_VISIBLE_DEVICES"], "4,5,6,7");
  EXPECT_EQ(env[3]["CUDA_VISIBLE_DEVICES"], "4,5,6,7");
}

TEST(LaunchEnvTest, AJobsOwnTorchrunVariablesWin) {
  auto f = cluster::ParseClusterYaml(
      "node_defaults: {gpus: 8, gpu_model: H100, gpu_memory: 80Gi, cpu: 64, memory: 512Gi}\n"
      "nodes: [{name: a}]\n",
      "c.yaml");
  ASSERT_TRUE(f.ok());
  auto spec =
      job::ParseJobSpec("name: g\ntasks:\n  - {gpus: 8, env: {PET_NPROC_PER_NODE: '2'}}\n", "j");
  ASSERT_TRUE(spec.ok());
  cluster::GangAssignment a;
  cluster::TaskPlacement task{0, 0, 0, 0, 0, 0, 0};
  for (uint32_t g = 0; g < 8; ++g) a.grants.push_back({g, 1000, 0});
  task.end_grant = 8;
  a.tasks.push_back(task);
  LaunchContext ctx;
  ctx.job_id = 7;
  ctx.spec = &*spec;
  ctx.assignment = &a;
  ctx.topology = &*f->topology;
  ctx.address_of = [](uint32_t) { return "10.0.0.1"; };
  ctx.master_port = 29500;
  auto env = TaskEnvironments(ctx);
  ASSERT_EQ(env.size(), 1u);
  EXPECT_EQ(env[0]["PET_NPROC_PER_NODE"], "2");
  EXPECT_EQ(env[0]["PET_NNODES"], "1");
  EXPECT_EQ(env[0]["PET_NODE_RANK"], "0");
}

// issue 16 item 7: a task's collectives go over the data interfaces of its GPUs' rails, and its
// rendezvous to the first node's data address, never over the management network.
TEST(LaunchEnvTest, TasksUseTheDataInterfacesOfTheirRails) {
  auto f = cluster::ParseClusterYaml(
      "networks: {management: 10.77.0.0/24}\n"
      "node_defaults: {gpus: 8, gpu_model: H100, gpu_memory: 80Gi, cpu: 64, memory: 512Gi,\n"
      "  data_interfaces: [{netdev: ib0, hca: mlx5_0}, {netdev: ib1, hca: mlx5_1}, ib2, {hca: "
      "mlx5_3}]}\n"
      "nodes: [{name: 'n[1-2]', management_address: '10.77.0.[11-12]', data_address: "
      "'10.78.0.[11-12]'}]\n",
      "c.yaml");
  ASSERT_TRUE(f.ok()) << f.status().message();
  const auto& t = *f->topology;
  EXPECT_EQ(t.nodes()[1].networks.management_address, "10.77.0.12");
  EXPECT_EQ(t.gpus()[5].rail, 1);  // rails default to one per data interface
  auto spec = job::ParseJobSpec(
      "name: g\ntasks:\n  - {replicas: 3, gpus: 2, env: {NCCL_SOCKET_IFNAME: eth0}}\n", "j");
  ASSERT_TRUE(spec.ok());
  // Task 0 on n2 GPUs 0,4 (rail 0 twice), task 1 on n1 GPUs 1,2 (rails 1, 2), task 2 on n1 GPUs 3,7
  // (rail 3).
  cluster::GangAssignment a;
  const std::vector<std::pair<uint32_t, std::vector<uint32_t>>> where = {
      {1, {0, 4}}, {0, {1, 2}}, {0, {3, 7}}};
  for (uint32_t k = 0; k < where.size(); ++k) {
    cluster::TaskPlacement task{
        where[k].first, 0, k, 0, 0, static_cast<uint32_t>(a.grants.size()), 0};
    for (uint32_t g : where[k].second)
      a.grants.push_back({t.nodes()[where[k].first].first_gpu + g, 1000, 0});
    task.end_grant = static_cast<uint32_t>(a.grants.size());
    a.tasks.push_back(task);
  }
  LaunchContext ctx;
  ctx.spec = &*spec;
  ctx.assignment = &a;
  ctx.topology = &t;
  ctx.address_of = [](uint32_t n) { return n == 0 ? "10.77.0.11" : "10.77.0.12"; };
  ctx.master_port = 29511;
  auto env = TaskEnvironments(ctx);
  ASSERT_EQ(env.size(), 3u);
  for (auto& e : env) EXPECT_EQ(e["MASTER_ADDR"], "10.78.0.12") << "task 0's node's data address";
  EXPECT_EQ(env[0]["NCCL_SOCKET_IFNAME"], "=ib0");
  EXPECT_EQ(env[0]["GLOO_SOCKET_IFNAME"], "ib0");
  EXPECT_EQ(env[0]["NCCL_IB_HCA"], "=mlx5_0");
  EXPECT_EQ(env[1]["NCCL_SOCKET_IFNAME"], "=ib1,ib2");
  EXPECT_EQ(env[1]["NCCL_IB_HCA"], "=mlx5_1") << "ib2 names no HCA";
  EXPECT_EQ(env[2]["NCCL_SOCKET_IFNAME"], "=ib0,ib1,ib2") << "rail 3 has no netdev: every rail's";
  EXPECT_EQ(env[2]["NCCL_IB_HCA"], "=mlx5_3");
}

TEST(LaunchEnvTest, NoNetworksDeclaredLeavesTheJobsOwnSettings) {
  auto f = cluster::ParseClusterYaml(
      "node_defaults: {gpus: 2, gpu_model: H100, gpu_memory: 80Gi, cpu: 8, memory: 64Gi}\nnodes: "
      "[{name: a}]\n",
      "c.yaml");
  ASSERT_TRUE(f.ok());
  auto spec =
      job::ParseJobSpec("name: g\ntasks:\n  - {gpus: 1, env: {GLOO_SOCKET_IFNAME: lo}}\n", "j");
  ASSERT_TRUE(spec.ok());
  cluster::GangAssignment a;
  a.grants.push_back({0, 1000, 0});
  a.tasks.push_back(cluster::TaskPlacement{0, 0, 0, 0, 0, 0, 1});
  LaunchContext ctx;
  ctx.spec = &*spec;
  ctx.assignment = &a;
  ctx.topology = &*f->topology;
  ctx.address_of = [](uint32_t) { return "10.0.0.1"; };
  auto env = TaskEnvironments(ctx);
  ASSERT_EQ(env.size(), 1u);
  EXPECT_EQ(env[0]["GLOO_SOCKET_IFNAME"], "lo");
  EXPECT_EQ(env[0].count("NCCL_SOCKET_IFNAME"), 0u);
  EXPECT_EQ(env[0]["MASTER_ADDR"], "10.0.0.1");
}

}  // namespace
}  // namespace hangar::controller
