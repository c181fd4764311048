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
  for (const char* bad :
       {"", "%4", "a-3", "5-2", "0-9:0", "0-9%0", "1,,2", "-3", "0-9:x", "0-200000"}) {
    auto a = ParseArraySpec(bad);
    ASSERT_FALSE(a.ok()) << bad;
    EXPECT_NE(a.status().message().find("array '"), std::string::npos) << a.status().message();
  }
  EXPECT_NE(ParseArraySpec("5-2").status().message().find("ends before it starts"),
            std::string::npos);
  EXPECT_NE(ParseArraySpec("0-200000").status().message().find("split it"), std::string::npos);
}

// A comma list of 150,000 indices (0.94 MB) was expanded in full before the cap was checked;
// every limit is now checked on the text.
TEST(ArraySpecTest, ALongCommaListIsCountedAndRefusedBeforeItIsExpanded) {
  std::string list;
  for (int i = 0; i < 150'000; ++i) list += (i ? "," : "") + std::to_string(i);
  auto n = CountArrayElements(list);
  ASSERT_FALSE(n.ok());
  EXPECT_NE(n.status().message().find("more than 100000 elements"), std::string::npos)
      << n.status().message();
  auto a = ParseArraySpec(list);
  ASSERT_FALSE(a.ok());
  EXPECT_NE(a.status().message().find("split it into several arrays"), std::string::npos);
  // Ranges are counted, not walked: 150,000 elements in a few bytes.
  EXPECT_FALSE(CountArrayElements("0-99999,100000-149999").ok());
  auto fits = CountArrayElements("0-99998:2,7,7%4");
  ASSERT_TRUE(fits.ok()) << fits.status().message();
  EXPECT_EQ(*fits, 50'002u);  // a repeated index counts each time it is written
}

// An index of 2^63 - 1 was accepted on its own (only ranges were checked), and a huge step
// overflowed the expansion.
TEST(ArraySpecTest, IndicesAreCappedAndStepsCannotOverflow) {
  for (const char* bad :
       {"9223372036854775807", "9223372036854775808", "1,10000000", "5-10000000"}) {
    auto a = ParseArraySpec(bad);
    ASSERT_FALSE(a.ok()) << bad;
    EXPECT_NE(a.status().message().find("array '"), std::string::npos) << a.status().message();
  }
  EXPECT_NE(ParseArraySpec("10000000").status().message().find("over the largest index, 9999999"),
            std::string::npos);
  auto a = ParseArraySpec("9999990-9999999:9223372036854775807");
  ASSERT_TRUE(a.ok()) << a.status().message();
  EXPECT_EQ(a->indices, (std::vector<int64_t>{9'999'990}));
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
  // An id of bytes that are not UTF-8 (`--after afterok:$'\xfe'`): the message's dump threw out of
  // the parser (the job_spec_json fuzz target).
  d = ParseDependencyFlag("afterok:\xfe");
  ASSERT_FALSE(d.ok());
  EXPECT_NE(d.status().message().find("is not a job id"), std::string::npos);
}

TEST(DependenciesTest, TheJobFileCarriesArrayAndAfterBothWays) {
  auto spec = ParseJobSpec(R"(name: sweep
array: "0-9%2"
after: {ok: [4], notok: [5]}
tasks: [{replicas: 1, gpus: 1, command: [/bin/true]}]
)",
                           "sweep.yaml");
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

TEST(BeginAndHoldTest, TheJobFileCarriesThemBothWaysAndABadTimeNamesItsLine) {
  auto spec = ParseJobSpec(R"(name: later
begin: 2027-01-15T08:00:00Z
hold: true
tasks: [{gpus: 1, command: [/bin/true]}]
)",
                           "later.yaml");
  ASSERT_TRUE(spec.ok()) << spec.status().message();
  EXPECT_EQ(spec->begin, Time{1'800'000'000'000});
  EXPECT_TRUE(spec->hold);
  auto again = JobSpecFromJson(JobSpecToJson(*spec));
  ASSERT_TRUE(again.ok()) << again.status().message();
  EXPECT_EQ(again->begin, spec->begin);
  EXPECT_TRUE(again->hold);
  EXPECT_EQ(ParseBeginTime("2027-01-15").value(), Time{1'800'000'000'000} - 8 * kHour);
  EXPECT_EQ(ParseBeginTime("2027-01-15 08:00:00").value(), Time{1'800'000'000'000});
  for (const char* bad : {"2027-01-15T08:00:00+02:00", "tomorrow", "2027-01-15T08:00", "08:00"}) {
    EXPECT_FALSE(ParseBeginTime(bad).ok()) << bad;
  }
  auto refused = ParseJobSpec("name: x\nbegin: soon\ntasks: [{gpus: 1, command: [a]}]\n", "x.yaml");
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("x.yaml:2"), std::string::npos)
      << refused.status().message();
  EXPECT_NE(refused.status().message().find("is not a UTC time; write 2026-12-08T22:00:00Z"),
            std::string::npos)
      << refused.status().message();
}

}  // namespace
}  // namespace hangar::job
