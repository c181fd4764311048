#include "controller/state/step_plan.h"

#include <gtest/gtest.h>

namespace hangar::controller {
namespace {

std::vector<AllocationNode> TwoNodes() { return {{"node-1", "7.0.0"}, {"node-2", "7.0.1"}}; }

std::vector<std::string> StepNodes(const std::vector<AllocationNode>& alloc, const StepLayout& l) {
  std::vector<std::string> out;
  for (size_t i : l.nodes) out.push_back(alloc[i].node);
  return out;
}

TEST(StepPlanTest, WithoutOptionsAStepRunsTheJobsTasksOnEveryNode) {
  StepAsk ask;
  ask.default_ntasks_per_node = 2;
  auto l = PlanStep(TwoNodes(), ask);
  ASSERT_TRUE(l.ok()) << l.status().message();
  ASSERT_EQ(l->tasks.size(), 4u);
  EXPECT_EQ(StepNodes(TwoNodes(), *l), (std::vector<std::string>{"node-1", "node-2"}));
  // Block layout: procids 0,1 on the first node, 2,3 on the second.
  EXPECT_EQ(l->tasks[1].nodeid, 0);
  EXPECT_EQ(l->tasks[1].localid, 1);
  EXPECT_EQ(l->tasks[2].nodeid, 1);
  EXPECT_EQ(l->tasks[2].localid, 0);
}

TEST(StepPlanTest, NodelistAndExcludePickTheNodesInsideTheAllocation) {
  StepAsk head;
  head.nodes = 1;
  head.nodelist = "node-2";
  auto l = PlanStep(TwoNodes(), head);
  ASSERT_TRUE(l.ok()) << l.status().message();
  EXPECT_EQ(StepNodes(TwoNodes(), *l), std::vector<std::string>{"node-2"});
  ASSERT_EQ(l->tasks.size(), 1u);
  EXPECT_EQ(l->tasks[0].nodeid, 0) << "SLURM_NODEID counts within the step";

  StepAsk workers;
  workers.nodes = 1;
  workers.exclude = "node-1";
  l = PlanStep(TwoNodes(), workers);
  ASSERT_TRUE(l.ok()) << l.status().message();
  EXPECT_EQ(StepNodes(TwoNodes(), *l), std::vector<std::string>{"node-2"});

  StepAsk outside;
  outside.nodelist = "node-9";
  l = PlanStep(TwoNodes(), outside);
  ASSERT_FALSE(l.ok());
  EXPECT_NE(l.status().message().find("not in the job's allocation (node-[1-2])"),
            std::string::npos)
      << l.status().message();
  StepAsk all_out;
  all_out.exclude = "node-[1-2]";
  EXPECT_FALSE(PlanStep(TwoNodes(), all_out).ok());
}

TEST(StepPlanTest, TaskCountsSpreadInBlocksAndTooManyNodesIsRefused) {
  StepAsk three;
  three.ntasks = 3;
  auto l = PlanStep(TwoNodes(), three);
  ASSERT_TRUE(l.ok());
  ASSERT_EQ(l->tasks.size(), 3u);
  EXPECT_EQ(l->tasks[1].nodeid, 0) << "the remainder goes to the first node";
  EXPECT_EQ(l->tasks[2].nodeid, 1);

  StepAsk one;
  one.ntasks = 1;
  l = PlanStep(TwoNodes(), one);
  ASSERT_TRUE(l.ok());
  EXPECT_EQ(l->nodes.size(), 1u) << "-n 1 alone takes one node";

  StepAsk per;
  per.ntasks = 4;
  per.ntasks_per_node = 2;
  l = PlanStep(TwoNodes(), per);
  ASSERT_TRUE(l.ok());
  EXPECT_EQ(l->nodes.size(), 2u);

  StepAsk big;
  big.nodes = 3;
  auto refused = PlanStep(TwoNodes(), big);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("has 2"), std::string::npos)
      << refused.status().message();
}

TEST(StepPlanTest, EachTaskGetsSlurmsVariables) {
  StepAsk ask;
  auto l = PlanStep(TwoNodes(), ask);
  ASSERT_TRUE(l.ok());
  auto env = StepTaskEnvironments({42, 3, TwoNodes(), *l});
  ASSERT_EQ(env.size(), 2u);
  EXPECT_EQ(env[1]["SLURM_PROCID"], "1");
  EXPECT_EQ(env[1]["SLURM_NODEID"], "1");
  EXPECT_EQ(env[1]["SLURM_LOCALID"], "0");
  EXPECT_EQ(env[1]["SLURM_STEP_ID"], "3");
  EXPECT_EQ(env[1]["SLURM_NTASKS"], "2");
  EXPECT_EQ(env[1]["SLURM_JOB_ID"], "42");
  EXPECT_EQ(env[1]["SLURM_JOB_NODELIST"], "node-[1-2]");
  EXPECT_EQ(env[1]["SLURM_STEP_NODELIST"], "node-[1-2]");
  EXPECT_EQ(env[1]["SLURMD_NODENAME"], "node-2");
  EXPECT_EQ(env[0]["SLURM_TASKS_PER_NODE"], "1(x2)");
}

// The job has GPUs 4-7 on node-1 and 0-3 on node-2: with --gpus-per-task each task gets its own,
// in SLURM_LOCALID order, from its own node's (as Slurm binds them since 21.08); without, it sees
// them all (its node's task's CUDA_VISIBLE_DEVICES, left alone).
TEST(StepPlanTest, GpusPerTaskGiveEachTaskItsOwnGpusOfItsNode) {
  std::vector<AllocationNode> alloc = {{"node-1", "7.0.0", {4, 5, 6, 7}},
                                       {"node-2", "7.0.1", {0, 1, 2, 3}}};
  StepAsk ask;
  ask.ntasks_per_node = 2;
  ask.gpus_per_task = 2;
  auto l = PlanStep(alloc, ask);
  ASSERT_TRUE(l.ok()) << l.status().message();
  StepEnvInputs in{42, 1, alloc, *l};
  in.gpus_per_task = 2;
  auto env = StepTaskEnvironments(in);
  ASSERT_EQ(env.size(), 4u);
  EXPECT_EQ(env[0]["CUDA_VISIBLE_DEVICES"], "4,5");
  EXPECT_EQ(env[1]["CUDA_VISIBLE_DEVICES"], "6,7");
  EXPECT_EQ(env[2]["CUDA_VISIBLE_DEVICES"], "0,1");
  EXPECT_EQ(env[3]["CUDA_VISIBLE_DEVICES"], "2,3");
  EXPECT_EQ(env[3]["SLURM_GPUS_PER_TASK"], "2");

  in.gpus_per_task = 0;
  EXPECT_EQ(StepTaskEnvironments(in)[0].count("CUDA_VISIBLE_DEVICES"), 0u);

  // Three tasks of two GPUs do not fit the job's four on a node: refused, with what would.
  ask.ntasks_per_node = 3;
  auto refused = PlanStep(alloc, ask);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().message(),
            "3 task(s) of --gpus-per-task=2 need 6 GPUs on node-1; the job has 4 there: run fewer "
            "tasks per node, ask fewer GPUs per task, or --gpu-bind=none to let every task see "
            "them all");
  // MIG instances are not shared out per task.
  alloc[1].mig = true;
  ask.ntasks_per_node = 1;
  auto mig = PlanStep(alloc, ask);
  ASSERT_FALSE(mig.ok());
  EXPECT_NE(mig.status().message().find("node-2 are MIG instances"), std::string::npos);
}

}  // namespace
}  // namespace hangar::controller
