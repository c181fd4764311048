#include "job/progress_spec.h"

#include <gtest/gtest.h>

#include <fstream>
#include <iterator>

#include "job/job_spec.h"

namespace hangar::job {
namespace {

TEST(ProgressSpecTest, AJobFileOptsInAndTheStoredFormReadsBack) {
  auto spec = ParseJobSpec(R"(
name: train
progress:
  hang_timeout: 10m
  on_hang: notify
  straggler_factor: 1.5
  straggler_reports: 3
tasks:
  - replicas: 2
    cpu: 100m
    command: ["true"]
)",
                           "job.yaml");
  ASSERT_TRUE(spec.ok()) << spec.status().message();
  EXPECT_EQ(spec->progress.hang_timeout, 10 * kMinute);
  EXPECT_EQ(spec->progress.on_hang, HangAction::kNotify);
  EXPECT_EQ(spec->progress.straggler_factor_milli, 1500);
  EXPECT_EQ(spec->progress.straggler_reports, 3);
  auto again = JobSpecFromJson(JobSpecToJson(*spec));
  ASSERT_TRUE(again.ok()) << again.status().message();
  EXPECT_EQ(again->progress.hang_timeout, 10 * kMinute);
  EXPECT_EQ(again->progress.on_hang, HangAction::kNotify);
  EXPECT_EQ(again->progress.straggler_factor_milli, 1500);
  EXPECT_EQ(again->progress.straggler_reports, 3);
}

TEST(ProgressSpecTest, DefaultsRestartAndAJobWithoutItWatchesNothing) {
  auto p = ProgressSpecFromJson({{"hang_timeout", "30s"}});
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->on_hang, HangAction::kRestart);
  EXPECT_EQ(p->straggler_factor_milli, 0);
  auto plain = ParseJobSpec("name: p\ntasks:\n  - cpu: 100m\n    command: [\"true\"]\n", "p");
  ASSERT_TRUE(plain.ok());
  EXPECT_TRUE(plain->progress.empty());
  EXPECT_FALSE(JobSpecToJson(*plain).contains("progress"));
}

TEST(ProgressSpecTest, MistakesAreRefusedWithTheLineAndWhatToWrite) {
  auto typo = ParseJobSpec(
      "name: p\nprogress:\n  hang_timeout: 10m\n  on_hang: reboot\ntasks:\n  - command: "
      "[\"true\"]\n",
      "job.yaml");
  ASSERT_FALSE(typo.ok());
  EXPECT_EQ(typo.status().message(),
            "job.yaml:3: progress.on_hang must be restart, fail or notify, not '\"reboot\"'");
  for (const nlohmann::json& bad :
       {nlohmann::json{{"hang_timeout", "0s"}}, nlohmann::json{{"hang_timeout", 10}},
        nlohmann::json{{"straggler_factor", "1.0"}},
        nlohmann::json{{"straggler_factor", 2}, {"straggler_reports", 0}},
        nlohmann::json{{"on_hang", "fail"}}, nlohmann::json{{"timeout", "10m"}},
        nlohmann::json("10m")}) {
    auto p = ProgressSpecFromJson(bad);
    ASSERT_FALSE(p.ok()) << bad.dump();
    EXPECT_NE(p.status().message().find("progress"), std::string::npos) << p.status().message();
  }
}

TEST(ProgressSpecTest, TheExampleInProgressMdLoads) {
  std::ifstream in(std::string(HANGAR_SOURCE_DIR) + "/docs/progress.md");
  const std::string text((std::istreambuf_iterator<char>(in)), {});
  const size_t at = text.find("```yaml\n");
  ASSERT_NE(at, std::string::npos);
  const size_t end = text.find("```", at + 8);
  auto spec = ParseJobSpec(text.substr(at + 8, end - at - 8), "docs/progress.md");
  ASSERT_TRUE(spec.ok()) << spec.status().message();
  EXPECT_EQ(spec->progress.hang_timeout, 10 * kMinute);
  EXPECT_EQ(spec->progress.on_hang, HangAction::kRestart);
  EXPECT_EQ(spec->progress.straggler_factor_milli, 1500);
  EXPECT_EQ(spec->progress.straggler_reports, 5);
}

}  // namespace
}  // namespace hangar::job
