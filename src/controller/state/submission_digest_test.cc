#include "controller/state/submission_digest.h"

#include <gtest/gtest.h>

namespace hangar::controller {
namespace {

TEST(SubmissionDigestTest, IsSha256OfTheBodyAndCountAndSoTheSameInEveryBuild) {
  // sha256("abc\n1"): fixed, whatever the standard library's hash does.
  EXPECT_EQ(SubmissionDigest::Of("abc", 1).sha256,
            "sha256:42be4acdebc7bc82896234906cf71b161c4f881bd22bb16888df636ddaca9fc2");
}

TEST(SubmissionDigestTest, ARetryMatchesAndAnotherRequestDoesNot) {
  const auto d = SubmissionDigest::Of("name: x\n", 2);
  EXPECT_TRUE(d.Matches(d.sha256));
  EXPECT_FALSE(d.Matches(SubmissionDigest::Of("name: x\n", 3).sha256));
  EXPECT_FALSE(d.Matches(SubmissionDigest::Of("name: y\n", 2).sha256));
  EXPECT_FALSE(d.Matches(""));
}

// A digest stored by a controller from before SHA-256 (std::hash's decimal number) still matches
// its retry, and never matches another request.
TEST(SubmissionDigestTest, DigestsStoredBeforeSha256AreStillHonoured) {
  const auto d = SubmissionDigest::Of("name: x\n", 1);
  EXPECT_TRUE(d.Matches(d.legacy));
  EXPECT_FALSE(d.Matches(SubmissionDigest::Of("name: z\n", 1).legacy));
  EXPECT_FALSE(d.Matches("sha256:" + d.legacy));
}

}  // namespace
}  // namespace hangar::controller
