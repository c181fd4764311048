#include "common/subprocess.h"

#include <gtest/gtest.h>

namespace hangar {
namespace {

TEST(RunCommandTest, CapturesOutputAndExitCode) {
  auto r = RunCommand({"sh", "-c", "echo out; echo err >&2; exit 3"});
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->exit_code, 3);
  EXPECT_EQ(r->out, "out\n");
  EXPECT_EQ(r->err, "err\n");
  EXPECT_EQ(r->Describe(), "exit 3: err");
}

TEST(RunCommandTest, PassesEnvironmentAndStdin) {
  CommandOptions o;
  o.env = {{"HANGAR_SUBPROCESS_TEST", "v1"}};
  o.stdin_data = "from stdin";
  auto r = RunCommand({"sh", "-c", "printf %s \"$HANGAR_SUBPROCESS_TEST\"; cat"}, o);
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->ok());
  EXPECT_EQ(r->out, "v1from stdin");
}

TEST(RunCommandTest, KillsAtTheDeadline) {
  CommandOptions o;
  o.timeout = 200;
  auto r = RunCommand({"sleep", "30"}, o);
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->timed_out);
  EXPECT_FALSE(r->ok());
}

TEST(RunCommandTest, NamesAProgramThatCannotRun) {
  auto r = RunCommand({"no-such-program-hangar"});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("no-such-program-hangar"), std::string::npos);
}

}  // namespace
}  // namespace hangar
