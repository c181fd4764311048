#include "sim/fgd/fgd_command.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <sstream>

#include "sim/fgd/report.h"

namespace hangar::sim::fgd {
namespace {

const std::string kData = std::string(HANGAR_SOURCE_DIR) + "/data/traces/openb/";

FgdOptions DefaultOptions(const std::string& json) {
  FgdOptions o;
  o.nodes = kData + "openb_node_list_gpu_node.csv";
  o.pods = kData + "openb_pod_list_default.csv";
  o.policy = "best-fit";
  o.seeds = "42";
  o.json = json;
  return o;
}

std::string TempPath(const std::string& name) { return ::testing::TempDir() + "/" + name; }

TEST(FgdCommandTest, ParsesSeedRangesAndLists) {
  EXPECT_EQ(*ParseSeeds("42-51"), (std::vector<int64_t>{42, 43, 44, 45, 46, 47, 48, 49, 50, 51}));
  EXPECT_EQ(*ParseSeeds("42,43"), (std::vector<int64_t>{42, 43}));
  EXPECT_EQ(*ParseSeeds("7"), std::vector<int64_t>{7});
  EXPECT_EQ(*ParseSeeds("1-2,9"), (std::vector<int64_t>{1, 2, 9}));
  for (const char* bad : {"", "x", "51-42", "42,", "-3", "4-", "1,1", "0-20000"}) {
    auto s = ParseSeeds(bad);
    EXPECT_FALSE(s.ok()) << bad;
  }
  EXPECT_EQ(ParseSeeds("1-3,2").status().message(), "--seeds lists seed 2 twice");
}

TEST(FgdCommandTest, ErrorsAreOneSentenceEach) {
  std::ostringstream out;
  FgdOptions o = DefaultOptions(TempPath("unused.json"));
  o.policy = "tetris";
  Status s = RunFgdCommand(o, out);
  EXPECT_EQ(s.message(),
            "unknown policy 'tetris'; choose one of: random, dot-product, gpu-clustering, "
            "gpu-packing, best-fit, fgd, hangar");
  o = DefaultOptions(TempPath("unused.json"));
  o.seeds = "42..51";
  EXPECT_EQ(RunFgdCommand(o, out).message(),
            "--seeds '42..51' is not a seed list; write a range like 42-51 or a list like 42,43");
  o = DefaultOptions(TempPath("unused.json"));
  o.pods = kData + "missing.csv";
  s = RunFgdCommand(o, out);
  EXPECT_EQ(s.code(), StatusCode::kNotFound);
  EXPECT_NE(s.message().find("missing.csv"), std::string::npos);
  o = DefaultOptions("");
  EXPECT_EQ(RunFgdCommand(o, out).message(), "--json is required: where to write the report");
  EXPECT_TRUE(out.str().empty());
}

TEST(FgdCommandTest, SameSeedsGiveTheSameReportWhateverTheThreads) {
  auto trace =
      LoadOpenbTrace(kData + "openb_node_list_gpu_node.csv", kData + "openb_pod_list_default.csv");
  ASSERT_TRUE(trace.ok());
  const std::vector<int64_t> seeds = {42, 43, 44};
  auto a = RunSeeds(*trace, "best-fit", seeds, 1.3, 2);
  auto b = RunSeeds(*trace, "best-fit", seeds, 1.3, 1);
  ASSERT_TRUE(a.ok() && b.ok());
  const std::string ja = ReportJson("best-fit", trace->workload, 1.3, *a, nullptr).dump();
  const std::string jb = ReportJson("best-fit", trace->workload, 1.3, *b, nullptr).dump();
  EXPECT_EQ(ja, jb);
  // A different seed list gives a different report.
  auto c = RunSeeds(*trace, "best-fit", {42, 43, 45}, 1.3, 2);
  ASSERT_TRUE(c.ok());
  EXPECT_NE(ReportJson("best-fit", trace->workload, 1.3, *c, nullptr).dump(), ja);
}

TEST(FgdCommandTest, WritesTheReportWithTheReference) {
  const std::string path = TempPath("fgd_report.json");
  FgdOptions o = DefaultOptions(path);
  o.policy = "fgd";
  o.reference = kData + "fgd_reference_subset";
  std::ostringstream out;
  Status s = RunFgdCommand(o, out);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_NE(out.str().find("alloc@100 95.140 %"), std::string::npos) << out.str();
  std::ifstream f(path);
  const nlohmann::json j = nlohmann::json::parse(f);
  EXPECT_EQ(j["policy"], "fgd");
  EXPECT_EQ(j["workload"], "openb_pod_list_default");
  EXPECT_EQ(j["seeds"], nlohmann::json::array({42}));
  EXPECT_DOUBLE_EQ(j["alloc_at_100"].get<double>(), 95.14);
  EXPECT_EQ(j["curves"]["alloc"].size(), 131u);
  EXPECT_EQ(j["curves"]["per_seed_frag"].size(), 1u);
  EXPECT_EQ(j["reference"]["policy"], "06-FGD");
  EXPECT_EQ(j["reference"]["seeds"], nlohmann::json::array({42}));  // our seeds only
  EXPECT_EQ(j["reference"]["alloc_at_100"], j["alloc_at_100"]);
  EXPECT_EQ(j["reference"]["curves"]["frag"], j["curves"]["frag"]);
  std::remove(path.c_str());
}

// One node, 4 cores and 2 GPUs; two pods of 3.5 cores and one GPU each. Whichever comes first
// takes a GPU and leaves half a core, so the other GPU is stranded (under one core left) and
// CPU-starved (below the 3.5 cores of any GPU pod) when the arrived request reaches 100 %.
TEST(FgdCommandTest, StrandedShareAtFullArrival) {
  OpenbTrace t;
  t.workload = "tiny";
  t.nodes.push_back({"n0", 4000, 65536, 2, "V100M16", 2});
  for (const char* name : {"p0", "p1"}) {
    OpenbPod p;
    p.name = name;
    p.milli_cpu = 3500;
    p.memory_mib = 1024;
    p.num_gpu = 1;
    p.gpu_milli = 1000;
    t.pods.push_back(p);
  }
  for (const char* policy : {"hangar", "fgd", "best-fit"}) {
    auto r = RunProtocol(t, RunOptions{policy, 42, 0});
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ(r->failed, 1) << policy;
    ASSERT_TRUE(r->stranded_at_100.has_value()) << policy;
    EXPECT_DOUBLE_EQ(*r->stranded_at_100, 50.0) << policy;
    EXPECT_DOUBLE_EQ(*r->starved_at_100, 50.0) << policy;
  }
  // With 2 cores per pod both fit: no GPU is left to strand.
  ASSERT_TRUE(ScalePodCpu(2000.0 / 3500.0, &t).ok());
  EXPECT_EQ(t.pods[0].milli_cpu, 2000);
  auto fits = RunProtocol(t, RunOptions{"hangar", 42, 0});
  ASSERT_TRUE(fits.ok());
  EXPECT_EQ(fits->failed, 0);
  EXPECT_DOUBLE_EQ(*fits->stranded_at_100, 0.0);
  const nlohmann::json j = ReportJson("hangar", "tiny", 0, {*fits}, nullptr);
  EXPECT_EQ(j["stranded_at_100"], 0.0);
  EXPECT_EQ(j["per_seed"]["starved_at_100"].size(), 1u);
  EXPECT_FALSE(ScalePodCpu(0, &t).ok());
}

TEST(FgdCommandTest, CpuScaleMakesTheMixCpuHeavier) {
  std::ostringstream out;
  FgdOptions o = DefaultOptions(TempPath("scaled.json"));
  o.cpu_scale = 2;
  ASSERT_TRUE(RunFgdCommand(o, out).ok());
  EXPECT_NE(out.str().find("cpu scale 2.00"), std::string::npos) << out.str();
  EXPECT_NE(out.str().find("stranded"), std::string::npos) << out.str();
  nlohmann::json heavy = nlohmann::json::parse(std::ifstream(o.json));
  o.cpu_scale = 1;
  o.json = TempPath("unscaled.json");
  ASSERT_TRUE(RunFgdCommand(o, out).ok());
  nlohmann::json plain = nlohmann::json::parse(std::ifstream(o.json));
  EXPECT_EQ(heavy["cpu_scale"], 2.0);
  // Twice the CPU per pod: CPU runs out long before the GPUs do (the cluster has 17 cores per
  // GPU, the trace's GPU pods ask 11 and, doubled, 22).
  EXPECT_LT(heavy["alloc_at_100"].get<double>(), plain["alloc_at_100"].get<double>() - 20);
  EXPECT_GT(heavy["stranded_at_100"].get<double>(), plain["stranded_at_100"].get<double>());
  o.cpu_scale = -1;
  EXPECT_EQ(
      RunFgdCommand(o, out).message(),
      "--cpu-scale must be above 0 and at most 100 (1.5 makes every pod ask for 1.5x its CPU)");
}

}  // namespace
}  // namespace hangar::sim::fgd
