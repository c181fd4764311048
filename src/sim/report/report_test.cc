#include "sim/report/report.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>

namespace hangar::sim {
namespace {

TEST(ReportTest, ReplayReportIsSelfContained) {
  nlohmann::json r = {{"policy", "fifo"},
                      {"trace", "t.csv"},
                      {"load", 4},
                      {"jobs", 3},
                      {"avg_jct_s", 160.5},
                      {"jct_cdf", {{{"jct_s", 100}, {"fraction", 0.34}}}},
                      {"timeline", {{{"t_s", 0}, {"gpu_util_pct", 50}, {"pending", 1}}}},
                      {"note", "</script><script>alert(1)</script>"}};
  std::string html = RenderReplayReport(r);
  EXPECT_NE(html.find("<!doctype html>"), std::string::npos);
  EXPECT_NE(html.find("new Chart("), std::string::npos);
  EXPECT_GT(html.size(), 100000u) << "the chart library must be inline";
  EXPECT_EQ(html.find("src=\"http"), std::string::npos) << "nothing may be fetched";
  EXPECT_EQ(html.find("</script><script>alert"), std::string::npos)
      << "data must not close the script";
  EXPECT_NE(html.find("160.5"), std::string::npos);
}

TEST(ReportTest, FgdReport) {
  nlohmann::json f = {
      {"policy", "hangar"},      {"workload", "openb_pod_list_default"},
      {"alloc_at_100", 96.1},    {"alloc_curve", {0, 1, 2}},
      {"frag_curve", {5, 5, 5}}, {"reference", {{"policy", "06-FGD"}, {"alloc_curve", {0, 1, 2}}}}};
  std::string html = RenderFgdReport(f);
  EXPECT_NE(html.find("openb_pod_list_default"), std::string::npos);
  EXPECT_NE(html.find("draw('alloc'"), std::string::npos);
}

TEST(ReportTest, UnwritablePathIsAnError) {
  EXPECT_FALSE(WriteReport("/nonexistent/dir/r.html", "x").ok());
}

TEST(ReportTest, JsonFileIsWrittenWholeOrNamedInTheError) {
  const std::string path = ::testing::TempDir() + "/report_test_figures.json";
  ASSERT_TRUE(WriteJsonFile(path, {{"ettr", 0.94}, {"runs", {1, 2}}}).ok());
  std::ifstream in(path);
  EXPECT_EQ(nlohmann::json::parse(in), nlohmann::json({{"ettr", 0.94}, {"runs", {1, 2}}}));
  std::remove(path.c_str());
  Status s = WriteJsonFile("/nonexistent/dir/figures.json", {{"a", 1}});
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("/nonexistent/dir/figures.json"), std::string::npos) << s.message();
  EXPECT_TRUE(CheckWritableFolder("").ok());
  EXPECT_TRUE(CheckWritableFolder(path).ok());
  const Status early = CheckWritableFolder("/nonexistent/dir/figures.json");
  ASSERT_FALSE(early.ok());
  EXPECT_NE(early.message().find("/nonexistent/dir does not exist"), std::string::npos)
      << early.message();
  // /dev/full accepts the open and fails the write, as a full disk does.
  EXPECT_FALSE(WriteJsonFile("/dev/full", {{"a", std::string(1 << 16, 'x')}}).ok());
}

}  // namespace
}  // namespace hangar::sim
