// --nodelist/-w and --exclude/-x become include_nodes/exclude_nodes, which the scheduler enforces.
#include "cli/sbatch_nodes.h"

#include <gtest/gtest.h>

#include "cli/sbatch.h"
#include "job/job_spec.h"

namespace hangar::cli::sbatch {
namespace {

StatusOr<BatchJob> Try(const std::string& directives, std::vector<std::string> command_line = {}) {
  return ConvertBatchScript({"#!/bin/bash\n" + directives + "srun hostname\n",
                             "job.sbatch",
                             std::move(command_line),
                             "/home/ada",
                             {},
                             {}});
}

TEST(SbatchNodesTest, NodeListsBecomeTheJobsNodeRules) {
  auto b =
      Try("#SBATCH -N 2 --gres=gpu:8\n#SBATCH -w gpu-[01-02]\n#SBATCH --exclude=gpu-07,gpu-09\n");
  ASSERT_TRUE(b.ok()) << b.status().message();
  EXPECT_EQ(b->spec["include_nodes"], "gpu-[01-02]");
  EXPECT_EQ(b->spec["exclude_nodes"], "gpu-07,gpu-09");
  EXPECT_TRUE(b->warnings.empty());
  auto spec = job::ParseJobSpec(b->yaml, "converted");
  ASSERT_TRUE(spec.ok()) << spec.status().message();
  EXPECT_EQ(spec->nodes.include, (std::vector<std::string>{"gpu-01", "gpu-02"}));
  EXPECT_EQ(spec->nodes.exclude, (std::vector<std::string>{"gpu-07", "gpu-09"}));
  // The command line overrides the script, as sbatch's does.
  b = Try("#SBATCH -x gpu-1\n", {"-x", "gpu-[2-3]"});
  ASSERT_TRUE(b.ok()) << b.status().message();
  EXPECT_EQ(b->spec["exclude_nodes"], "gpu-[2-3]");
}

TEST(SbatchNodesTest, WhatCannotBeHonouredIsRefusedWithItsLines) {
  auto b =
      Try("#SBATCH -N 1\n#SBATCH -w n[1-3]\n#SBATCH -x n[3-4]\n#SBATCH --nodelist=/tmp/hosts\n");
  ASSERT_FALSE(b.ok());
  // Every problem at once: the list longer than the job, and the file.
  EXPECT_EQ(b.status().message(),
            "job.sbatch:3: --nodelist=n[1-3] names 3 nodes but the job has 1 (job.sbatch:2); each "
            "listed node holds "
            "one of the job's nodes: give --nodes=3\n"
            "job.sbatch:5: #SBATCH --nodelist=/tmp/hosts: '/tmp/hosts' names a file of nodes, "
            "which hangar sbatch does "
            "not read: write the names as a host list (node[1-3,5])");
  b = Try("#SBATCH -N 2\n#SBATCH -w n[1-3]\n");
  ASSERT_FALSE(b.ok());
  EXPECT_EQ(b.status().message(),
            "job.sbatch:3: --nodelist=n[1-3] names 3 nodes but the job has 2 (job.sbatch:2); each "
            "listed node holds "
            "one of the job's nodes: give --nodes=3");
  b = Try("#SBATCH -N 2\n#SBATCH -w n[1-2]\n#SBATCH -x n2\n");
  ASSERT_FALSE(b.ok());
  EXPECT_EQ(b.status().message(),
            "job.sbatch:4: --exclude=n2 names n2, which --nodelist (job.sbatch:3) lists too; a "
            "node cannot be both: "
            "remove it from one of them");
  b = Try("#SBATCH -x 'n[2-'\n");
  ASSERT_FALSE(b.ok());
  EXPECT_EQ(b.status().message(),
            "job.sbatch:2: #SBATCH -x n[2-: host list 'n[2-': '[' without ']'")
      << b.status().message();
}

}  // namespace
}  // namespace hangar::cli::sbatch
