#include "controller/redact.h"

#include <gtest/gtest.h>

namespace hangar::controller {
namespace {

TEST(RedactTest, CredentialsInTheQueryAreMasked) {
  EXPECT_EQ(RedactCredentials("/v1/jobs?token=hgr_3f2a_s3cr3t&count=2"),
            "/v1/jobs?token=REDACTED&count=2");
  EXPECT_EQ(RedactCredentials("/v1/jobs?count=2&access_token=abc"),
            "/v1/jobs?count=2&access_token=REDACTED");
  EXPECT_EQ(RedactCredentials("/v1/jobs?Access_Token=abc;x=1"),
            "/v1/jobs?Access_Token=REDACTED;x=1");
  EXPECT_EQ(RedactCredentials("/v1/jobs?access%5Ftoken=abc"), "/v1/jobs?access%5Ftoken=REDACTED");
  EXPECT_EQ(
      RedactCredentials("/x?api_key=1&password=2&client_secret=3&key=4&auth=5"),
      "/x?api_key=REDACTED&password=REDACTED&client_secret=REDACTED&key=REDACTED&auth=REDACTED");
  EXPECT_EQ(RedactCredentials("/x?token="), "/x?token=REDACTED");
  EXPECT_EQ(RedactCredentials("/x?%zz=1&token=%"),
            "/x?%zz=1&token=REDACTED");  // bad escapes are no problem
}

TEST(RedactTest, AHangarTokenIsMaskedWhereverItIs) {
  // Under a parameter of any name, and in the path: the id stays (it names the token), the secret
  // goes.
  EXPECT_EQ(RedactCredentials("/v1/jobs?x=Bearer%20hgr_3f2a9c01d4e7_0123abcd"),
            "/v1/jobs?x=Bearer%20hgr_3f2a9c01d4e7_REDACTED");
  EXPECT_EQ(RedactCredentials("/v1/hgr_dev_00ff/x"), "/v1/hgr_dev_REDACTED/x");
  EXPECT_EQ(RedactCredentials("/v1/jobs?a=hgr_1_x&b=hgr_2_y"),
            "/v1/jobs?a=hgr_1_REDACTED&b=hgr_2_REDACTED");
}

TEST(RedactTest, TargetsWithoutCredentialsStayAsTheyAre) {
  for (const char* t :
       {"/v1/jobs", "/v1/jobs?count=10&user=alice", "/v1/tokens/3f2a9c01d4e7/rotate", "/v1/x?",
        "/v1/x?&&", "/v1/x?monkey=1", "hgr_", "/hgr_abc", "/hgr_abc_"}) {
    EXPECT_EQ(RedactCredentials(t), t);
  }
}

}  // namespace
}  // namespace hangar::controller
