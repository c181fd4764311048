#include "cli/session_client.h"

#include <gtest/gtest.h>

#include "cli/port_forward.h"

namespace hangar::cli {
namespace {

TEST(EscapeDetectorTest, EnterTildeDotDetaches) {
  EscapeDetector e;
  std::string out;
  EXPECT_FALSE(e.Feed("ls\r", 3, &out));
  EXPECT_TRUE(e.Feed("~.", 2, &out));
  EXPECT_EQ(out, "ls\r");
}

TEST(EscapeDetectorTest, ATildeElsewhereOrDoubledIsTyped) {
  EscapeDetector e;
  std::string out;
  EXPECT_FALSE(e.Feed("a~.", 3, &out));   // not after Enter
  EXPECT_FALSE(e.Feed("\r~~", 3, &out));  // "~~" sends one '~'
  EXPECT_FALSE(e.Feed("\r~x", 3, &out));  // '~' then another key: both go
  EXPECT_EQ(out, "a~.\r~\r~x");
}

TEST(EscapeDetectorTest, TheFirstKeysOfASessionCountAsALineStart) {
  EscapeDetector e;
  std::string out;
  EXPECT_TRUE(e.Feed("~.", 2, &out));
  EXPECT_EQ(out, "");
}

TEST(ParseJobTaskTest, JobAloneMeansTaskZero) {
  uint64_t job = 0;
  uint32_t task = 9;
  ASSERT_TRUE(ParseJobTask("42", &job, &task).ok());
  EXPECT_EQ(job, 42u);
  EXPECT_EQ(task, 0u);
  ASSERT_TRUE(ParseJobTask("42.3", &job, &task).ok());
  EXPECT_EQ(task, 3u);
  EXPECT_FALSE(ParseJobTask("llm-serve", &job, &task).ok());
  EXPECT_FALSE(ParseJobTask("42.", &job, &task).ok());
  EXPECT_FALSE(ParseJobTask("42.x", &job, &task).ok());
}

TEST(ParsePortPairTest, OnePortIsBothSidesAndLocalZeroIsAnyFreePort) {
  uint16_t local = 1, remote = 1;
  ASSERT_TRUE(ParsePortPair("8888", &local, &remote).ok());
  EXPECT_EQ(local, 8888);
  EXPECT_EQ(remote, 8888);
  ASSERT_TRUE(ParsePortPair("9000:8888", &local, &remote).ok());
  EXPECT_EQ(local, 9000);
  EXPECT_EQ(remote, 8888);
  ASSERT_TRUE(ParsePortPair("0:6006", &local, &remote).ok());
  EXPECT_EQ(local, 0);
  EXPECT_EQ(remote, 6006);
  for (const char* bad : {"", "0", "8888:0", "70000", "a:80", "80:", ":80", "1:2:3", "-1"}) {
    auto s = ParsePortPair(bad, &local, &remote);
    EXPECT_FALSE(s.ok()) << bad;
    EXPECT_NE(s.message().find("LOCAL:REMOTE"), std::string::npos) << s.message();
  }
}

}  // namespace
}  // namespace hangar::cli
