#include "cli/slurm_commands.h"

#include <gtest/gtest.h>

namespace hangar::cli {
namespace {

// `hangar squeue` answered "did you mean 'hangar requeue'?", a command that stops running jobs.
TEST(SlurmCommandHintTest, SlurmsClientCommandsPointToTheHangarCommandThatDoesTheSame) {
  EXPECT_EQ(SlurmCommandHint("squeue").rfind("Slurm's squeue is 'hangar jobs -o slurm' here", 0),
            0u);
  EXPECT_EQ(SlurmCommandHint("sinfo").rfind("Slurm's sinfo is 'hangar nodes' here", 0), 0u);
  EXPECT_NE(SlurmCommandHint("squeue").find("'hangar slurm squeue'"), std::string::npos);
  EXPECT_EQ(
      SlurmCommandHint("scontrol").rfind("Slurm's scontrol is 'hangar slurm scontrol' here", 0),
      0u);
  EXPECT_EQ(SlurmCommandHint("sacct").rfind("Slurm's sacct is 'hangar history' here", 0), 0u);
  EXPECT_NE(SlurmCommandHint("salloc").find("'hangar slurm salloc'"), std::string::npos);
  for (const char* other : {"requeue", "jobs", "squeu", ""}) EXPECT_EQ(SlurmCommandHint(other), "");
}

}  // namespace
}  // namespace hangar::cli
