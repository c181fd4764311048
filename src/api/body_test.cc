#include "api/body.h"

#include <gtest/gtest.h>

namespace hangar::api {
namespace {

TEST(BodyTest, Utf8) {
  EXPECT_TRUE(
      CheckUtf8("name: trainer \xc3\xa9t\xc3\xa9 \xe2\x9c\x93 \xf0\x9f\x9a\x80", "the body").ok());
  Status bad = CheckUtf8("name: \xff\xfe", "the body");
  EXPECT_EQ(bad.message(), "the body is not valid UTF-8 (byte 6); send text in UTF-8");
  EXPECT_FALSE(CheckUtf8("\xc0\xaf", "x").ok()) << "overlong";
  EXPECT_FALSE(CheckUtf8("\xed\xa0\x80", "x").ok()) << "surrogate";
  EXPECT_FALSE(CheckUtf8("\xe2\x9c", "x").ok()) << "cut short";
}

TEST(BodyTest, NestingIsBoundedBeforeParsing) {
  EXPECT_TRUE(CheckNesting(R"({"a": [[1, 2], {"b": "[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[["}]})",
                           "the body")
                  .ok());
  const std::string deep(1 << 20, '[');  // the 1 MiB body that made the parser allocate ~230 MB
  Status s = CheckNesting(deep, "the body");
  EXPECT_EQ(s.message(),
            "the body nests deeper than 32 levels; no Hangar document needs that many");
  EXPECT_EQ(ParseObject(deep, "{}").status().code(), StatusCode::kInvalidArgument);
}

TEST(BodyTest, FieldsOfTheWrongTypeOrRangeAreSentences) {
  auto body =
      ParseObject(R"({"reason": 5, "note": [1], "gpu": 1099511627776, "ok": "x", "n": 3})", "{}");
  ASSERT_TRUE(body.ok());
  EXPECT_EQ(OptString(*body, "reason").status().message(),
            "\"reason\" must be a string, not number 5");
  EXPECT_EQ(OptString(*body, "note").status().message(),
            "\"note\" must be a string, not array [1]");
  EXPECT_EQ(OptInt(*body, "gpu", 0, 1023).status().message(),
            "\"gpu\" must be from 0 to 1023; 1099511627776 is not");
  EXPECT_EQ(**OptString(*body, "ok"), "x");
  EXPECT_EQ(**OptInt(*body, "n", 0, 10), 3);
  EXPECT_FALSE(OptString(*body, "absent")->has_value());
  EXPECT_EQ(ParseObject("[1]", "{\"reason\": \"bad fan\"}").status().message(),
            "the body must be a JSON object like {\"reason\": \"bad fan\"}");
  EXPECT_TRUE(ParseObject("", "{}")->is_object());
}

TEST(BodyTest, Counts) {
  EXPECT_EQ(*ParseCount("50", "limit", 1, 10000), 50);
  EXPECT_EQ(ParseCount("abc", "limit", 1, 10000).status().message(),
            "limit must be a whole number (1 to 10000), not 'abc'");
  EXPECT_EQ(ParseCount("0", "limit", 1, 10000).status().message(),
            "limit must be 1 to 10000; 0 is not");
  EXPECT_FALSE(ParseCount("99999999999999999999999", "count", 1, 10).ok());
  EXPECT_FALSE(ParseCount("5x", "count", 1, 10).ok());
}

TEST(BodyTest, SafeDumpNeverThrows) {
  nlohmann::json j = {{"name", std::string("bad \xff")}};
  EXPECT_NO_THROW(SafeDump(j));
}

}  // namespace
}  // namespace hangar::api
