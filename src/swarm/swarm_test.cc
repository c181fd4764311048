#include "swarm/swarm.h"

#include <gtest/gtest.h>

namespace hangar::swarm {
namespace {

TEST(SwarmTest, TaskDurationFromTheCommand) {
  EXPECT_EQ(TaskDuration({"sleep", "2"}, 5), 2000);
  EXPECT_EQ(TaskDuration({"/bin/sh", "-c", "echo hi; sleep 1.5"}, 5), 1500);
  EXPECT_EQ(TaskDuration({"/usr/bin/sleep", "0.25"}, 5), 250);
  EXPECT_EQ(TaskDuration({"python3", "train.py"}, 7000), 7000);
  EXPECT_EQ(TaskDuration({"sleep", "x"}, 7), 7);
}

}  // namespace
}  // namespace hangar::swarm
