#include "cli/slurm_salloc.h"

#include <gtest/gtest.h>

namespace hangar::cli {
namespace {

TEST(SallocTest, OptionsEndAtTheCommandOrAtTwoDashes) {
  SallocLine a = SplitSallocLine({"-N2", "--gres=gpu:8"});
  EXPECT_EQ(a.options, (std::vector<std::string>{"-N2", "--gres=gpu:8"}));
  EXPECT_TRUE(a.command.empty());
  SallocLine b = SplitSallocLine({"-N", "2", "-t", "30", "srun", "-l", "hostname"});
  EXPECT_EQ(b.options, (std::vector<std::string>{"-N", "2", "-t", "30"}));
  EXPECT_EQ(b.command, (std::vector<std::string>{"srun", "-l", "hostname"}));
  SallocLine c = SplitSallocLine({"--exclusive", "--", "-weird-program"});
  EXPECT_EQ(c.options, (std::vector<std::string>{"--exclusive"}));
  EXPECT_EQ(c.command, (std::vector<std::string>{"-weird-program"}));
}

TEST(SallocTest, TheAllocationIsAnInteractiveJobRunningTheShellOnce) {
  auto job = SallocJob(SplitSallocLine({"-N2", "--gres=gpu:1", "-t", "1:00:00"}), "/tmp", true);
  ASSERT_TRUE(job.ok()) << job.status().message();
  EXPECT_EQ(job->spec.value("interactive", false), true) << job->yaml;
  EXPECT_EQ(job->spec.value("terminal", false), true) << job->yaml;
  EXPECT_NE(job->yaml.find("interactive: true"), std::string::npos) << job->yaml;
  EXPECT_NE(job->yaml.find("exec \"${SHELL:-/bin/sh}\" -i"), std::string::npos) << job->yaml;
  // Two nodes, one GPU each, as sbatch reads the same options.
  EXPECT_NE(job->yaml.find("replicas: 2"), std::string::npos) << job->yaml;
  EXPECT_EQ(job->yaml.find("slurm-%j.out"), std::string::npos)
      << "the shell's output is the terminal's, not a file's: " << job->yaml;
  EXPECT_NE(job->yaml.find("gpus: 1"), std::string::npos) << job->yaml;
}

TEST(SallocTest, ACommandIsQuotedAndWithoutATerminalStdinIsPassed) {
  auto job =
      SallocJob(SplitSallocLine({"-N1", "sh", "-c", "echo it's $SLURM_JOB_ID"}), "/tmp", false);
  ASSERT_TRUE(job.ok()) << job.status().message();
  EXPECT_NE(job->yaml.find("exec 'sh' '-c' 'echo it'\\''s $SLURM_JOB_ID'"), std::string::npos)
      << job->yaml;
  EXPECT_FALSE(job->spec.contains("terminal")) << job->yaml;
  EXPECT_EQ(job->spec.value("stdin", false), true) << job->yaml;
}

TEST(SallocTest, EveryProblemIsNamedAtOnce) {
  auto job = SallocJob(SplitSallocLine({"-N", "x", "-t", "soon"}), "/tmp", true);
  ASSERT_FALSE(job.ok());
  EXPECT_NE(job.status().message().find("-N x"), std::string::npos) << job.status().message();
  EXPECT_NE(job.status().message().find("-t soon"), std::string::npos) << job.status().message();
  auto unknown = SallocJob(SplitSallocLine({"--no-such-option", "--nor-this"}), "/tmp", true);
  ASSERT_FALSE(unknown.ok());
  EXPECT_NE(unknown.status().message().find("--nor-this"), std::string::npos)
      << unknown.status().message();
}

}  // namespace
}  // namespace hangar::cli
