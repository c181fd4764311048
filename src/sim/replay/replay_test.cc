#include "sim/replay/replay.h"

#include <gtest/gtest.h>

namespace hangar::sim {
namespace {

TraceJob Job(uint64_t row, Time submit_s, Duration run_s, int gpus, const std::string& vc = "") {
  TraceJob j;
  j.row = row;
  j.submit = submit_s * kSecond;
  j.runtime = run_s * kSecond;
  j.replicas = gpus <= 8 ? 1 : gpus / 8;
  j.gpus_per_replica = gpus <= 8 ? gpus : 8;
  j.partition = vc;
  return j;
}

// Worked by hand on one node of 8 GPUs:
//   a: t=0,  8 GPUs, runs 100   fifo: 0-100            backfill: 0-100
//   b: t=10, 8 GPUs, runs 100   fifo: 100-200 (JCT 190)  backfill: 100-200
//   c: t=20, 2 GPUs, runs 10    fifo: 200-210 (JCT 190)  backfill: 200-210 (nothing frees early)
// fifo-backfill cannot do better here: the node is full until 100 and b reserves it.
// Avg JCT = (100 + 190 + 190) / 3 = 160. With sjf-oracle, c (10 s) goes before b at t=100:
//   c: 100-110 (JCT 90), b: 100-200 on the other 6 GPUs? No: b needs all 8, so b waits for c:
//   b: 110-210 (JCT 200). Avg = (100 + 90 + 200) / 3 = 130.
TEST(ReplayTest, HandWorkedJcts) {
  std::vector<TraceJob> jobs = {Job(1, 0, 100, 8), Job(2, 10, 100, 8), Job(3, 20, 10, 2)};
  std::vector<ClusterPartition> cluster = {{"", UniformCluster("one", 1)}};
  for (auto [policy, avg] : {std::pair{"fifo", 160.0}, std::pair{"fifo-backfill", 160.0},
                             std::pair{"sjf-oracle", 130.0}}) {
    ReplayOptions opt;
    opt.policy = *MakeReplayPolicy(policy);
    auto r = RunReplay(jobs, cluster, opt);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    nlohmann::json m = ReplayMetrics(*r);
    EXPECT_EQ(m["jobs"], 3) << policy;
    EXPECT_DOUBLE_EQ(m["avg_jct_s"].get<double>(), avg) << policy;
    EXPECT_DOUBLE_EQ(m["makespan_s"].get<double>(), 210.0) << policy;
  }
}

TEST(ReplayTest, SelectionLoadAndPartitions) {
  const Time day = 86400;
  std::vector<TraceJob> jobs = {Job(1, 0, 10, 1, "a"), Job(2, day, 10, 1, "a"), Job(3, day + 100, 10, 1, "b"),
                                Job(4, 2 * day, 10, 1, "a"), Job(5, day + 50, 10, 1, "zz")};
  std::vector<ClusterPartition> vcs = {{"a", UniformCluster("a", 1)}, {"b", UniformCluster("b", 1)}};
  ReplayOptions opt;
  opt.policy = *MakeReplayPolicy("fifo");
  opt.from = day * kSecond;
  opt.to = day * kSecond;  // one day, both ends included
  opt.load = 2;
  auto r = RunReplay(jobs, vcs, opt);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->done.size(), 2u);
  EXPECT_EQ(r->no_partition, 1);
  // Job 3 arrives 100 s after job 2; at load 2 that is 50 s.
  EXPECT_EQ(r->done[1].submit - r->done[0].submit, 50 * kSecond);
  EXPECT_EQ(r->total_gpus, 16);
  opt.from = 10 * day * kSecond;
  opt.to = 11 * day * kSecond;
  EXPECT_FALSE(RunReplay(jobs, vcs, opt).ok());
}

TEST(ReplayTest, DeterministicAcrossThreads) {
  std::vector<TraceJob> jobs;
  for (int i = 0; i < 400; ++i) jobs.push_back(Job(i + 1, i * 7, 30 + (i * 37) % 400, 1 << (i % 4), i % 2 ? "a" : "b"));
  std::vector<ClusterPartition> vcs = {{"a", UniformCluster("a", 2)}, {"b", UniformCluster("b", 3)}};
  nlohmann::json first;
  for (int threads : {1, 2}) {
    ReplayOptions opt;
    opt.policy = *MakeReplayPolicy("hangar");
    opt.threads = threads;
    auto r = RunReplay(jobs, vcs, opt);
    ASSERT_TRUE(r.ok());
    nlohmann::json m = ReplayMetrics(*r);
    m.erase("wall_s");
    if (threads == 1) first = m;
    else EXPECT_EQ(m, first);
  }
}

// The hangar policy learns run times only from jobs that finish: lengthening one long job's run
// time changes nothing that happens before it would have ended.
TEST(ReplayTest, HangarDoesNotReadRunTimes) {
  std::vector<TraceJob> jobs;
  for (int i = 0; i < 300; ++i)
    jobs.push_back(Job(i + 1, i * 11, 20 + (i * 53) % 900, 1 << (i % 3)));
  std::vector<ClusterPartition> cluster = {{"", UniformCluster("one", 1)}};
  ReplayOptions opt;
  opt.policy = *MakeReplayPolicy("hangar");
  const size_t longest = 7;
  jobs[longest].runtime = 2000 * kSecond;
  auto a = RunReplay(jobs, cluster, opt);
  jobs[longest].runtime = 3000 * kSecond;
  auto b = RunReplay(jobs, cluster, opt);
  ASSERT_TRUE(a.ok() && b.ok());
  ASSERT_EQ(a->done.size(), b->done.size());
  const Time cutoff = a->done[longest].end;
  int compared = 0;
  for (size_t i = 0; i < a->done.size(); ++i) {
    if (a->done[i].end >= cutoff) continue;
    EXPECT_EQ(a->done[i].start, b->done[i].start) << i;
    EXPECT_EQ(a->done[i].end, b->done[i].end) << i;
    compared++;
  }
  EXPECT_GT(compared, 50);
  // Afterwards they do differ: the run time matters once the job has run it.
  EXPECT_NE(a->done[longest].end, b->done[longest].end);
}

}  // namespace
}  // namespace hangar::sim
