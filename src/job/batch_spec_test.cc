#include "job/batch_spec.h"

#include <gtest/gtest.h>

#include "job/job_spec.h"

namespace hangar::job {
namespace {

TEST(ArraySpecTest, ExpandsRangesStepsListsAndTheCap) {
  auto a = ParseArraySpec("0-4");
  ASSERT_TRUE(a.ok()) << a.status().message();
  EXPECT_EQ(a->indices, (std::vector<int64_t>{0, 1, 2, 3, 4}));
  EXPECT_EQ(a->max_running, 0);
  a = ParseArraySpec("0-9:3%2");
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->indices, (std::vector<int64_t>{0, 3, 6, 9}));
  EXPECT_EQ(a->max_running, 2);
  a = ParseArraySpec("7,1,3-5,3");
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->indices, (std::vector<int64_t>{1, 3, 4, 5, 7}));
  EXPECT_EQ(a->text, "7,1,3-5,3");
}

TEST(ArraySpecTest, RefusesWhatSlurmWouldWithTheSyntax) {
  for (const char* bad : {"", "%4", "a-3", "5-2", "0-9:0", "0-9%0", "1,,2", "-3", "0-9:x", "0-200000"}) {
    auto a = ParseArraySpec(bad);
    ASSERT_FALSE(a.ok()) << bad;
    EXPECT_NE(a.status().message().find("array '"), std::string::npos) << a.status().message();
  }
  EXPECT_NE(ParseArraySpec("5-2").status().message().find("ends before it starts"), std::string::npos);
  EXPECT_NE(ParseArraySpec("0-200000").status().message().find("split it"), std::string::npos);
}

TEST(DependenciesTest, ParsesTheMapAndTheFlag) {
  auto d = DependenciesFromJson(nlohmann::json::parse(R"({"ok": [12, "13"], "any": 14})"));
  ASSERT_TRUE(d.ok()) << d.status().message();
  EXPECT_EQ(d->ok, (std::vector<uint64_t>{12, 13}));
  EXPECT_EQ(d->any, (std::vector<uint64_t>{14}));
  EXPECT_TRUE(d->notok.empty());
  d = ParseDependencyFlag("afterok:1:2,notok:3");
  ASSERT_TRUE(d.ok()) << d.status().message();
  EXPECT_EQ(d->ok, (std::vector<uint64_t>{1, 2}));
  EXPECT_EQ(d->notok, (std::vector<uint64_t>{3}));
  EXPECT_EQ(d->ToJson().dump(), R"({"notok":[3],"ok":[1,2]})");
}

TEST(DependenciesTest, RefusesUnknownKindsAndIds) {
  auto d = DependenciesFromJson(nlohmann::json::parse(R"({"started": [1]})"));
  ASSERT_FALSE(d.ok());
  EXPECT_NE(d.status().message().find("after.started is not a kind"), std::string::npos);
  d = DependenciesFromJson(nlohmann::json::parse(R"({"ok": ["twelve"]})"));
  ASSERT_FALSE(d.ok());
  EXPECT_NE(d.status().message().find("is not a job id"), std::string::npos);
  EXPECT_FALSE(ParseDependencyFlag("singleton").ok());
  EXPECT_FALSE(ParseDependencyFlag("ok:").ok());
}

TEST(DependenciesTest, TheJobFileCarriesArrayAndAfterBothWays) {
  auto spec = ParseJobSpec(R"(name: sweep
array: "0-9%2"
after: {ok: [4], notok: [5]}
tasks: [{replicas: 1, gpus: 1, command: [/bin/true]}]
)", "sweep.yaml");
  ASSERT_TRUE(spec.ok()) << spec.status().message();
  EXPECT_EQ(spec->array.indices.size(), 10u);
  EXPECT_EQ(spec->array.max_running, 2);
  EXPECT_EQ(spec->after.ok, (std::vector<uint64_t>{4}));
  auto again = JobSpecFromJson(JobSpecToJson(*spec));
  ASSERT_TRUE(again.ok()) << again.status().message();
  EXPECT_EQ(again->array.text, "0-9%2");
  EXPECT_EQ(again->after.notok, (std::vector<uint64_t>{5}));
  auto bad = ParseJobSpec("name: x\narray: 3-1\ntasks: [{gpus: 1, command: [a]}]\n", "x.yaml");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("x.yaml:2"), std::string::npos) << bad.status().message();
}

}  // namespace
}  // namespace hangar::job
