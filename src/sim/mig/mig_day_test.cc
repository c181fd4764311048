// The MIG day: the pod-to-profile table, the demand's shifting mix, the proportional static
// layout, and reshaping against a fixed layout on the lean simulator.
#include "sim/mig/mig_day.h"

#include <gtest/gtest.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>

#include "sim/mig/mig_command.h"

namespace hangar::sim::mig {
namespace {

using cluster::MigShape;

TEST(MigDayTest, EachShareGetsTheSmallestProfileThatHoldsIt) {
  EXPECT_EQ(ShapeForGpuMilli(50), MigShape::k1g);
  EXPECT_EQ(ShapeForGpuMilli(125), MigShape::k1g);
  EXPECT_EQ(ShapeForGpuMilli(130), MigShape::k1gDouble);  // 1/7 compute holds it, 1/8 memory not
  EXPECT_EQ(ShapeForGpuMilli(230), MigShape::k2g);
  EXPECT_EQ(ShapeForGpuMilli(320), MigShape::k3g);
  EXPECT_EQ(ShapeForGpuMilli(460), MigShape::k4g);
  EXPECT_EQ(ShapeForGpuMilli(810), MigShape::k7g);
}

TEST(MigDayTest, ReadsOnlyTheSharingPodsAndClipsRunTimes) {
  const std::string path = ::testing::TempDir() + "/pods.csv";
  {
    std::ofstream f(path);
    f << "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,"
         "deletion_time,"
         "scheduled_time\n"
         "a,1000,1024,1,470,,LS,Running,0,1000,100\n"   // 3g, 900 s
         "b,1000,1024,1,1000,,LS,Running,0,1000,100\n"  // a whole GPU: not a sharing pod
         "c,1000,1024,0,0,,LS,Running,0,1000,100\n"     // no GPU
         "d,1000,1024,1,100,,LS,Running,0,110,100\n";   // 1g, 10 s -> 60 s
  }
  auto pods = ReadSharingPods({path});
  ASSERT_TRUE(pods.ok()) << pods.status().ToString();
  ASSERT_EQ(pods->size(), 2u);
  EXPECT_EQ((*pods)[0].shape, MigShape::k4g);
  EXPECT_EQ((*pods)[0].runtime, 900 * kSecond);
  EXPECT_EQ((*pods)[1].runtime, 60 * kSecond);
  auto missing = ReadSharingPods({::testing::TempDir() + "/nothing.csv"});
  EXPECT_FALSE(missing.ok());
  std::remove(path.c_str());
}

std::vector<MigPod> Mix() {
  std::vector<MigPod> pods;
  for (int i = 0; i < 30; ++i) pods.push_back({MigShape::k1g, 20 * kMinute});
  for (int i = 0; i < 10; ++i) pods.push_back({MigShape::k2g, 30 * kMinute});
  for (int i = 0; i < 10; ++i) pods.push_back({MigShape::k3g, 30 * kMinute});
  for (int i = 0; i < 5; ++i) pods.push_back({MigShape::k7g, 40 * kMinute});
  return pods;
}

TEST(MigDayTest, TheMixShiftsOverTheDay) {
  auto topo = MigDayCluster(2);
  MigDayConfig cfg;
  auto jobs = DayOfDemand(Mix(), *topo, cfg);
  ASSERT_GT(jobs.size(), 200u);
  const auto again = DayOfDemand(Mix(), *topo, cfg);  // the same seed gives the same day
  ASSERT_EQ(again.size(), jobs.size());
  for (size_t i = 0; i < jobs.size(); ++i) {
    EXPECT_EQ(again[i].submit, jobs[i].submit);
    EXPECT_EQ(again[i].runtime, jobs[i].runtime);
  }
  // Small pods peak at 6 h (sin = 1) and are rarest at 18 h.
  int small[2] = {0, 0}, all[2] = {0, 0};
  for (const SimJob& j : jobs) {
    const int half = j.submit >= 12 * kHour;
    all[half]++;
    small[half] += j.request->groups[0].shape.milli <= 2;
  }
  EXPECT_GT(double(small[0]) / all[0], double(small[1]) / all[1] + 0.3);
}

TEST(MigDayTest, TheProportionalLayoutCutsEveryGpuWithEveryShapeTheDayNeeds) {
  auto topo = MigDayCluster(2);
  auto jobs = DayOfDemand(Mix(), *topo, MigDayConfig{});
  auto layout = ProportionalLayout(jobs, *topo, 1.0);
  ASSERT_EQ(layout.size(), 16u);
  int count[cluster::kMigShapes] = {};
  for (const auto& l : layout) {
    EXPECT_EQ(l.Mask() & 0x7f, 0x7f) << "every compute slice is in an instance";
    for (uint8_t s : l.shape_at) {
      if (s != cluster::kNoMigShape) ++count[s];
    }
  }
  EXPECT_GT(count[static_cast<int>(MigShape::k7g)], 0);
  EXPECT_GT(count[static_cast<int>(MigShape::k3g)], 0);
  EXPECT_GT(count[static_cast<int>(MigShape::k1g)], 0);
}

TEST(MigDayTest, ReshapingServesShapesAFixedLayoutLacks) {
  auto topo = MigDayCluster(1);
  MigDayConfig cfg;
  cfg.day = 2 * kHour;
  cfg.load = 0.5;
  auto jobs = DayOfDemand(Mix(), *topo, cfg);
  std::vector<cluster::MigLayout> ones(topo->gpus().size());
  for (auto& l : ones) {
    for (int s = 0; s < 7; ++s) l.Add(MigShape::k1g, s);
  }
  auto fixed = RunDay(topo, jobs, ones, /*reshape=*/false, cfg);
  ASSERT_TRUE(fixed.ok());
  EXPECT_GT(fixed->never, 0) << "2g, 3g and 7g never fit 1g instances";
  EXPECT_EQ(fixed->reshape.reshapes, 0);
  auto dynamic = RunDay(topo, jobs, ones, /*reshape=*/true, cfg);
  ASSERT_TRUE(dynamic.ok());
  EXPECT_EQ(dynamic->never, 0);
  EXPECT_GT(dynamic->reshape.reshapes, 0);
  EXPECT_GT(dynamic->reshape.instances_destroyed, 0);
  EXPECT_GT(dynamic->util, 0.1);
  EXPECT_LE(dynamic->util, 1.0);
}

// `hangar sim mig` as docs/mig.md runs it, from the checkout (its default demand is the shipped
// gpushare40 pods): the comparison's figures, and reshaping beating the best static layout.
TEST(SimMigCommandTest, RunsTheDocsCommandOnTheShippedPods) {
  std::string doc;
  {
    std::ifstream in(std::string(HANGAR_SOURCE_DIR) + "/docs/mig.md");
    doc.assign(std::istreambuf_iterator<char>(in), {});
  }
  const size_t at = doc.find("hangar sim mig ");
  ASSERT_NE(at, std::string::npos) << "docs/mig.md shows the command";
  std::string args = doc.substr(at + 7, doc.find('\n', at) - at - 7);  // "sim mig ..."
  ASSERT_EQ(args.rfind("sim mig", 0), 0u) << args;
  args = args.substr(4);  // "mig ..."
  CLI::App app;
  int rc = -1;
  RegisterMigCommand(app, &rc);
  ::testing::internal::CaptureStdout();
  app.parse(args + " --json", false);
  const std::string out = ::testing::internal::GetCapturedStdout();
  ASSERT_EQ(rc, 0) << args;
  auto j = nlohmann::json::parse(out, nullptr, false);
  ASSERT_TRUE(j.is_object()) << out;
  for (const char* k : {"static_avg_wait_s", "dynamic_avg_wait_s", "static_util", "dynamic_util",
                        "reconfigurations"}) {
    EXPECT_TRUE(j.contains(k)) << k;
  }
  EXPECT_GT(j["jobs"].get<int64_t>(), 100);
  EXPECT_LT(j["dynamic_avg_wait_s"].get<double>(), j["static_avg_wait_s"].get<double>()) << out;
  EXPECT_GE(j["dynamic_util"].get<double>(), j["static_util"].get<double>() - 0.01) << out;
  EXPECT_GT(j["reconfigurations"].get<int64_t>(), 0);
}

TEST(SimMigCommandTest, RefusesBadInputSayingWhatToGive) {
  for (const std::string bad : {"mig --load -1", "mig --nodes 0", "mig --reshape-seconds -5"}) {
    CLI::App app;
    int rc = -1;
    RegisterMigCommand(app, &rc);
    ::testing::internal::CaptureStderr();
    app.parse(bad, false);
    const std::string err = ::testing::internal::GetCapturedStderr();
    EXPECT_EQ(rc, 2) << bad;
    EXPECT_NE(err.find("error: --"), std::string::npos) << err;
  }
  CLI::App app;
  int rc = -1;
  RegisterMigCommand(app, &rc);
  ::testing::internal::CaptureStderr();
  app.parse("mig --pods /nonexistent/pods.csv", false);
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(rc, 1);
  EXPECT_NE(err.find("/nonexistent/pods.csv"), std::string::npos) << err;
}

}  // namespace
}  // namespace hangar::sim::mig
