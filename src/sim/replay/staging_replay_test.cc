// `hangar sim replay --staging`: the artifact rule (artifacts.h), the replay's staging figures
// and the command's flags.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "sim/replay/artifacts.h"
#include "sim/replay/replay.h"
#include "sim/replay/replay_command.h"

namespace hangar::sim {
namespace {

constexpr double kGB = 1e9;

TraceJob Job(uint64_t row, Time submit_s, Duration run_s, int gpus, const std::string& vc = "vc") {
  TraceJob j;
  j.row = row;
  j.submit = submit_s * kSecond;
  j.runtime = run_s * kSecond;
  j.replicas = gpus <= 8 ? 1 : gpus / 8;
  j.gpus_per_replica = gpus <= 8 ? gpus : 8;
  j.partition = vc;
  j.time_limit = j.runtime;
  return j;
}

TEST(ArtifactRuleTest, HashIsFnv1a64) {
  EXPECT_EQ(Fnv1a64(""), 14695981039346656037ull);
  EXPECT_EQ(Fnv1a64("a"), 0xaf63dc4c8601ec8cull);
}

TEST(ArtifactRuleTest, ModelsFollowGroupSizeClassAndDay) {
  ArtifactCatalogue c(ArtifactRule{});
  const auto a = c.For(Job(1, 100, 10, 8)), b = c.For(Job(2, 200, 10, 8));
  ASSERT_EQ(a.size(), 2u);              // weights and a dataset
  EXPECT_EQ(a[0].object, b[0].object);  // the same group, class and day: the same model
  EXPECT_EQ(a[1].object, b[1].object);
  EXPECT_NE(a[0].object, a[1].object);
  // Class 3 (5-8 GPUs): 16-64 GB of weights; datasets 8-64 GB.
  EXPECT_GE(a[0].bytes, 16 * kGB);
  EXPECT_LT(a[0].bytes, 64 * kGB);
  EXPECT_GE(a[1].bytes, 8 * kGB);
  EXPECT_LT(a[1].bytes, 64 * kGB);
  const auto one = c.For(Job(3, 100, 10, 1)), big = c.For(Job(4, 100, 10, 64));
  EXPECT_GE(one[0].bytes, 2 * kGB);
  EXPECT_LT(one[0].bytes, 8 * kGB);
  EXPECT_GE(big[0].bytes, 64 * kGB);
  EXPECT_LT(big[0].bytes, 256 * kGB);
  EXPECT_NE(one[0].object, a[0].object);
  // Another group has its own catalogue.
  EXPECT_NE(c.For(Job(5, 100, 10, 8, "other"))[0].object, a[0].object);
  // Jobs without GPUs need nothing.
  EXPECT_TRUE(c.For(Job(6, 100, 10, 0)).empty());
  // Over many days a group's class-3 jobs use at most M = 8 models.
  std::set<uint32_t> models;
  for (int d = 0; d < 100; ++d) models.insert(c.For(Job(7, d * 86400, 10, 8))[0].object);
  EXPECT_GT(models.size(), 3u);
  EXPECT_LE(models.size(), 8u);
  ArtifactRule weights_only;
  weights_only.datasets = false;
  EXPECT_EQ(ArtifactCatalogue(weights_only).For(Job(1, 100, 10, 8)).size(), 1u);
}

// A busy mix on 4 nodes with small caches (evictions), with and without data-aware placement
// and pre-staging.
std::vector<TraceJob> Mix() {
  std::vector<TraceJob> jobs;
  const int sizes[] = {1, 2, 4, 8, 16, 8, 1, 32};
  for (int i = 0; i < 120; ++i) {
    jobs.push_back(
        Job(i + 1, i * 1800, 600 + (i * 7919) % 7200, sizes[i % 8], i % 3 ? "vc" : "vc2"));
  }
  return jobs;
}

ReplayOptions StagingOn(bool on) {
  ReplayOptions opt;
  opt.policy = *MakeReplayPolicy("fifo-backfill");
  opt.staging.enabled = true;
  opt.staging.node_cache_bytes = static_cast<int64_t>(150 * kGB);
  opt.staging.origin_bytes_per_s = 200e6;
  opt.staging.data_aware = opt.staging.prestage = on;
  return opt;
}

TEST(StagingReplayTest, LostGpuHoursAddUpOverJobs) {
  const std::vector<ClusterPartition> cluster = {{"", UniformCluster("c", 4)}};
  for (bool on : {true, false}) {
    auto r = RunReplay(Mix(), cluster, StagingOn(on));
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    const nlohmann::json m = ReplayMetrics(*r);
    ASSERT_TRUE(m.contains("staging"));
    double lost_h = 0;
    for (const auto& o : r->done) {
      EXPECT_GE(o.end - o.start, o.runtime + o.staging);
      lost_h += static_cast<double>(o.gpus_milli) / 1000.0 * static_cast<double>(o.staging) /
                1000.0 / 3600.0;
    }
    EXPECT_GT(lost_h, 0.0);
    EXPECT_NEAR(m["staging"]["gpu_hours_lost"].get<double>(), lost_h, 1e-6);
    EXPECT_EQ(m["staging"]["data_aware"].get<bool>(), on);
    EXPECT_GT(m["staging"]["evictions"].get<int64_t>(), 0);
    EXPECT_EQ(m["staging"]["starts_with_objects"].get<int64_t>(), 120);
    if (!on) {
      EXPECT_EQ(m["staging"]["prestage_transfers"].get<int64_t>(), 0);
    }
  }
  // Without staging the same replay reports none and starts at once.
  ReplayOptions plain;
  plain.policy = *MakeReplayPolicy("fifo-backfill");
  auto r = RunReplay(Mix(), cluster, plain);
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(ReplayMetrics(*r).contains("staging"));
}

TEST(StagingReplayTest, StagingNeedsTheLeanEngine) {
  ReplayOptions opt = StagingOn(true);
  opt.engine = [](std::shared_ptr<const cluster::Topology>,
                  const SimConfig&) -> StatusOr<std::unique_ptr<Engine>> {
    return Status::Internal("not called");
  };
  auto r = RunReplay(Mix(), {{"", UniformCluster("c", 4)}}, opt);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("lean engine only"), std::string::npos);
}

class StagingCommandTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // A folder of this process's own: ctest runs this suite's tests at once, and a shared
    // /tmp/staging_trace.csv was read empty while the other test wrote it.
    dir_ = ::testing::TempDir() + "staging_" + std::to_string(getpid()) + "_" +
           ::testing::UnitTest::GetInstance()->current_test_info()->name();
    std::filesystem::create_directories(dir_);
    std::ofstream t(dir_ + "/staging_trace.csv");
    t << "submit,duration,replicas,gpus_per_replica,milli_gpu,gpu_models,cpu,memory,queue,priority,"
         "tier,time_limit\n";
    for (int i = 0; i < 40; ++i) {
      t << i * 600 << "," << 1200 + (i * 37) % 3600 << "," << (i % 5 == 0 ? 2 : 1) << ",8,1000,,,,"
        << (i % 2 ? "a" : "b") << ",0,guaranteed," << 1200 + (i * 37) % 3600 << "\n";
    }
    std::ofstream c(dir_ + "/staging_cluster.yaml");
    c << "nodes:\n";
    for (int i = 0; i < 4; ++i) {
      c << "  - {name: n" << i
        << ", gpus: 8, gpu_model: H100, gpu_memory: 80Gi, cpu: 64, memory: 512Gi}\n";
    }
  }
  void TearDown() override {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  int Replay(const std::string& flags) {
    CLI::App app;
    int rc = 0;
    RegisterReplayCommand(app, &rc);
    app.parse("replay --trace " + dir_ + "/staging_trace.csv --cluster " + dir_ +
                  "/staging_cluster.yaml " + "--policy fifo-backfill " + flags,
              false);
    return rc;
  }
  std::string dir_;
};

TEST_F(StagingCommandTest, CompareRunsBothConfigurations) {
  const std::string json = dir_ + "/staging_compare.json";
  ASSERT_EQ(Replay("--staging-compare --node-cache-gb 100 --origin-mbps 500 --json " + json), 0);
  const nlohmann::json m = nlohmann::json::parse(std::ifstream(json));
  ASSERT_TRUE(m.contains("staging_compare"));
  const auto& on = m["staging_compare"]["on"];
  const auto& off = m["staging_compare"]["off"];
  EXPECT_TRUE(on["data_aware"].get<bool>());
  EXPECT_TRUE(on["prestage"].get<bool>());
  EXPECT_FALSE(off["data_aware"].get<bool>());
  EXPECT_FALSE(off["prestage"].get<bool>());
  EXPECT_EQ(on["node_cache_gb"].get<double>(), 100.0);
  EXPECT_EQ(on["origin_mbps"].get<double>(), 500.0);
  EXPECT_EQ(on["jobs"], off["jobs"]);
  EXPECT_EQ(m["avg_jct_s"], on["avg_jct_s"]);  // the main figures are the "on" run's
  EXPECT_GT(off["gpu_hours_lost"].get<double>(), 0.0);
}

TEST_F(StagingCommandTest, BadFlagsAreRefused) {
  EXPECT_EQ(Replay("--origin-mbps 10"), 2);  // needs --staging
  EXPECT_EQ(Replay("--staging --data-aware maybe"), 2);
  EXPECT_EQ(Replay("--staging --origin-mbps 0"), 2);
  EXPECT_EQ(Replay("--staging --models-per-class 0"), 2);
  EXPECT_EQ(Replay("--staging-compare --prestage off"), 2);
  EXPECT_EQ(Replay("--staging --engine controller"), 2);
  EXPECT_EQ(Replay("--staging --prestage off --data-aware off"), 0);
}

}  // namespace
}  // namespace hangar::sim
