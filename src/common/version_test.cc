#include "common/version.h"

#include <gtest/gtest.h>

namespace hangar {
namespace {

TEST(VersionTest, TheBuildsVersionIsARelease) {
  auto v = ParseReleaseVersion(Version());
  ASSERT_TRUE(v.has_value()) << Version();
  EXPECT_EQ(Version(), "0.2.0");
}

TEST(VersionTest, ParsesWhatAgentsSend) {
  auto v = ParseReleaseVersion("hangar 0.12.3-rc1");
  ASSERT_TRUE(v.has_value());
  EXPECT_EQ(v->major, 0);
  EXPECT_EQ(v->minor, 12);
  EXPECT_EQ(v->patch, 3);
  EXPECT_FALSE(ParseReleaseVersion("hangar dev").has_value());
  EXPECT_FALSE(ParseReleaseVersion("1.2").has_value());
}

TEST(VersionTest, AControllerMayBeOneMinorAheadOfItsAgentsNeverBehind) {
  EXPECT_TRUE(CheckAgentSkew("0.2.0", "hangar 0.2.0").ok());
  EXPECT_TRUE(CheckAgentSkew("0.2.1", "hangar 0.2.0").ok());
  EXPECT_TRUE(CheckAgentSkew("0.2.0", "hangar 0.1.7").ok());
  EXPECT_TRUE(CheckAgentSkew("0.2.0", "").ok());
  Status old = CheckAgentSkew("0.3.0", "hangar 0.1.0");
  EXPECT_EQ(old.code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(old.message(),
            "the agent runs hangar 0.1.0, this controller hangar 0.3.0: the controller is more "
            "than one minor version "
            "ahead (the policy: a controller may be at most one minor version ahead of its agents, "
            "never behind; "
            "docs/operations.md, \"Versions and upgrades\"); upgrade the agent");
  EXPECT_NE(CheckAgentSkew("0.2.0", "hangar 0.3.0").message().find("upgrade the controller first"),
            std::string::npos);
  EXPECT_NE(CheckAgentSkew("0.2.0", "hangar 0.2.1").message().find("newer than its controller"),
            std::string::npos);
  EXPECT_NE(CheckAgentSkew("1.0.0", "hangar 0.9.0").message().find("different major"),
            std::string::npos);
  EXPECT_NE(CheckAgentSkew("0.2.0", "hangar dev").message().find("cannot be read"),
            std::string::npos);
}

TEST(VersionTest, AnAgentHasTheFeaturesItNamesAndAnUnnamedOneHasAll) {
  EXPECT_EQ(AgentFeatureNames(kEveryAgentFeature),
            (std::vector<std::string>{"terminals", "sessions", "maintenance", "container-steps"}));
  // A simulated agent names no version: it can do everything.
  EXPECT_EQ(AgentFeaturesOf("", {}), kEveryAgentFeature);
  // A 0.1.0 agent names a version and no features: none of them.
  EXPECT_EQ(AgentFeaturesOf("hangar 0.1.0", {}), 0);
  // A newer agent's names this controller does not know are ignored.
  EXPECT_EQ(AgentFeaturesOf("hangar 0.2.0", {"sessions", "gpudirect-storage"}),
            Bit(AgentFeature::kSessions));
  EXPECT_EQ(AgentFeaturesOf("hangar 0.2.0", AgentFeatureNames(kEveryAgentFeature)),
            kEveryAgentFeature);
  const std::string why = AgentLacks("node-3", "hangar 0.1.0", AgentFeature::kSessions);
  EXPECT_NE(why.find("node-3's agent runs hangar 0.1.0, which cannot open sessions"),
            std::string::npos)
      << why;
  EXPECT_NE(why.find("upgrade its agent to hangar " + std::string(Version())), std::string::npos)
      << why;
}

}  // namespace
}  // namespace hangar
