#include "sim/replay/trace.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>

namespace hangar::sim {
namespace {

std::string Write(const std::string& name, const std::string& text) {
  std::string path = ::testing::TempDir() + "/" + name;
  std::ofstream(path) << text;
  return path;
}

constexpr const char* kHeader =
    "submit,duration,replicas,gpus_per_replica,milli_gpu,gpu_models,cpu,memory,queue,priority,tier,"
    "time_limit\n";

TEST(TraceTest, ReadsHangarFormat) {
  auto path = Write("ok.csv", std::string(kHeader) +
                                  "# a comment\n"
                                  "0,3600,2,8,1000,H100|H200,32,256Gi,research,10,guaranteed,7200\n"
                                  "2017-10-09 07:01:55,60.5,1,1,250,,2,8Gi,,0,opportunistic,\n\n");
  auto jobs = ReadHangarTrace(path);
  ASSERT_TRUE(jobs.ok()) << jobs.status().ToString();
  ASSERT_EQ(jobs->size(), 2u);
  const auto& a = (*jobs)[0];
  EXPECT_EQ(a.row, 3u);
  EXPECT_EQ(a.runtime, 3600 * kSecond);
  EXPECT_EQ(a.replicas, 2);
  EXPECT_EQ(a.gpu_models, (std::vector<std::string>{"H100", "H200"}));
  EXPECT_EQ(a.milli_cpu, 32000);
  EXPECT_EQ(a.time_limit, 7200 * kSecond);
  const auto& b = (*jobs)[1];
  EXPECT_EQ(b.submit, 1507532515LL * 1000);
  EXPECT_EQ(b.runtime, 60500);
  EXPECT_EQ(b.milli_gpu, 250);
  EXPECT_EQ(b.tier, job::Tier::kOpportunistic);
  EXPECT_EQ(b.queue, "default");
  EXPECT_EQ(b.time_limit, 0);
}

TEST(TraceTest, MalformedRowsNameTheLine) {
  struct Case {
    std::string rows, expect;
  } cases[] = {
      {"0,10,1,1\n", "bad.csv:2: expected 12 columns"},
      {"x,10,1,1,1000,,,,,,,\n", "bad.csv:2: submit 'x' is neither"},
      {"0,-5,1,1,1000,,,,,,,\n", "bad.csv:2: duration '-5'"},
      {"0,5,0,1,1000,,,,,,,\n", "bad.csv:2: replicas '0'"},
      {"0,5,1,2,500,,,,,,,\n", "bad.csv:2: a share of a GPU"},
      {"0,5,1,1,1000,,,,,,gold,\n", "bad.csv:2: tier 'gold'"},
      {"0,5,1,1,1000,,,lots,,,,\n", "bad.csv:2: memory:"},
      {"0,5,1,1,1000,,,,,,,\n0,5,1,1,1000,,,,,,,soon\n", "bad.csv:3: time_limit 'soon'"},
      // Found by fuzzing: a number of seconds no Duration holds was converted anyway (UB).
      {"0333333333333333333333333333333333333333333333333333333333333333333,5,1,1,1000,,,,,,,\n",
       "bad.csv:2: submit '0333"},
      {"0,1e300,1,1,1000,,,,,,,\n", "bad.csv:2: duration '1e300'"},
      {"0,nan,1,1,1000,,,,,,,\n", "bad.csv:2: duration 'nan'"},
  };
  for (const auto& c : cases) {
    auto r = ReadHangarTrace(Write("bad.csv", std::string(kHeader) + c.rows));
    ASSERT_FALSE(r.ok()) << c.rows;
    EXPECT_NE(r.status().message().find(c.expect), std::string::npos) << r.status().message();
  }
  auto no_header = ReadHangarTrace(Write("nh.csv", "0,5,1,1,1000,,,,,,,\n"));
  EXPECT_NE(no_header.status().message().find("nh.csv:1: the header must be"), std::string::npos);
  EXPECT_EQ(ReadHangarTrace("/nonexistent.csv").status().code(), StatusCode::kNotFound);
}

TEST(TraceTest, ReadsPhillyAsShipped) {
  auto path = Write("philly.csv",
                    "timestamp,duration,num_gpus,gpu_time,cluster\n"
                    "2017-10-09 07:01:55,66.0,1,66.0,11cb48\n"
                    "2017-10-03 01:00:00,100.0,16,1600.0,6214e9\n"
                    "2017-10-03 01:00:00,100.0,12,1200.0,e13805\n\n");
  auto jobs = ReadPhillyTrace(path);
  ASSERT_TRUE(jobs.ok()) << jobs.status().ToString();
  ASSERT_EQ(jobs->size(), 3u);
  EXPECT_EQ((*jobs)[0].gpus_per_replica, 1);
  EXPECT_EQ((*jobs)[0].partition, "11cb48");
  EXPECT_EQ((*jobs)[1].replicas, 2);
  EXPECT_EQ((*jobs)[1].gpus_per_replica, 8);
  EXPECT_EQ((*jobs)[2].replicas, 2);  // 12 GPUs take two whole nodes
  auto bad = ReadPhillyTrace(Write(
      "pb.csv",
      "timestamp,duration,num_gpus,gpu_time,cluster\n2017-10-09 07:01:55,66.0,zero,66.0,x\n"));
  EXPECT_NE(bad.status().message().find("pb.csv:2: num_gpus 'zero'"), std::string::npos);
  auto vcs = ReadPhillyPartitions(Write("vc.csv", "vc,node num\na,64\nb,8\n"));
  ASSERT_TRUE(vcs.ok());
  EXPECT_EQ((*vcs)[1].nodes, 8);
  EXPECT_FALSE(ReadPhillyPartitions(Write("vc2.csv", "vc,node num\na,none\n")).ok());
}

TEST(TraceTest, SeedLists) {
  EXPECT_EQ(*ParseSeedList("42-45"), (std::vector<uint64_t>{42, 43, 44, 45}));
  EXPECT_EQ(*ParseSeedList("1,5,9"), (std::vector<uint64_t>{1, 5, 9}));
  EXPECT_FALSE(ParseSeedList("9-1").ok());
  EXPECT_FALSE(ParseSeedList("a").ok());
}

}  // namespace
}  // namespace hangar::sim

namespace hangar::sim {
namespace {

TEST(TraceTest, ReadsTheOptionalNodeRuleColumns) {
  const std::string header =
      "submit,duration,replicas,gpus_per_replica,milli_gpu,gpu_models,cpu,memory,queue,priority,"
      "tier,time_limit,"
      "include_nodes,exclude_nodes\n";
  auto jobs =
      ReadHangarTrace(Write("nodes.csv", header + "0,10,2,1,1000,,,,,,,,n-[1-2],n-[5-6]|n-9\n"
                                                  "5,10,1,1,1000,,,,,,,,,\n"));
  ASSERT_TRUE(jobs.ok()) << jobs.status().message();
  EXPECT_EQ((*jobs)[0].nodes.include, (std::vector<std::string>{"n-1", "n-2"}));
  EXPECT_EQ((*jobs)[0].nodes.exclude, (std::vector<std::string>{"n-5", "n-6", "n-9"}));
  EXPECT_TRUE((*jobs)[1].nodes.empty());
  auto bad = ReadHangarTrace(Write("nodes-bad.csv", header + "0,10,1,1,1000,,,,,,,,n-[1-2],\n"));
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find(
                "nodes-bad.csv:2: include_nodes names 2 nodes but the job has 1 replicas"),
            std::string::npos)
      << bad.status().message();
}

}  // namespace
}  // namespace hangar::sim
