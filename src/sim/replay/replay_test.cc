#include "sim/replay/replay.h"

#include <gtest/gtest.h>

#include <fstream>

#include "sim/replay/replay_command.h"

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
  std::vector<TraceJob> jobs = {Job(1, 0, 10, 1, "a"), Job(2, day, 10, 1, "a"),
                                Job(3, day + 100, 10, 1, "b"), Job(4, 2 * day, 10, 1, "a"),
                                Job(5, day + 50, 10, 1, "zz")};
  std::vector<ClusterPartition> vcs = {{"a", UniformCluster("a", 1)},
                                       {"b", UniformCluster("b", 1)}};
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
  for (int i = 0; i < 400; ++i)
    jobs.push_back(Job(i + 1, i * 7, 30 + (i * 37) % 400, 1 << (i % 4), i % 2 ? "a" : "b"));
  std::vector<ClusterPartition> vcs = {{"a", UniformCluster("a", 2)},
                                       {"b", UniformCluster("b", 3)}};
  nlohmann::json first;
  for (int threads : {1, 2}) {
    ReplayOptions opt;
    opt.policy = *MakeReplayPolicy("hangar");
    opt.threads = threads;
    auto r = RunReplay(jobs, vcs, opt);
    ASSERT_TRUE(r.ok());
    nlohmann::json m = ReplayMetrics(*r);
    m.erase("wall_s");
    if (threads == 1)
      first = m;
    else
      EXPECT_EQ(m, first);
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

// Two VCs of one 8-GPU node each; "busy" submits two 8-GPU jobs of 1000 s at t=0, "idle" one
// 8-GPU job of 100 s at t=100.
//   partitions: busy 0-1000 and 1000-2000, idle 100-200           avg JCT (1000+2000+100)/3
//   shared pool: busy's second job borrows idle's node at 0; at 100 idle's job is within its
//   guarantee and reclaims the node: a busy job (either: both started at 0, both borrowers) is
//   preempted and runs again 200-1130 (900 s left + 30 s restore)  avg JCT (1000+1130+100)/3
std::vector<TraceJob> TwoVcs() {
  return {Job(1, 0, 1000, 8, "busy"), Job(2, 0, 1000, 8, "busy"), Job(3, 100, 100, 8, "idle")};
}
std::vector<ClusterPartition> TwoVcCluster() {
  return {{"busy", UniformCluster("busy", 1)}, {"idle", UniformCluster("idle", 1)}};
}
const nlohmann::json& QueueNamed(const nlohmann::json& m, const std::string& name) {
  for (const auto& q : m["queues"]) {
    if (q["name"] == name) return q;
  }
  static const nlohmann::json none;
  ADD_FAILURE() << "no queue " << name;
  return none;
}

TEST(ReplaySharedPoolTest, BusyVcBorrowsAndIdleVcReclaimsItsGuarantee) {
  for (const char* policy : {"fifo-backfill", "sjf-oracle", "fifo"}) {
    ReplayOptions opt;
    opt.policy = *MakeReplayPolicy(policy);
    auto parts = RunReplay(TwoVcs(), TwoVcCluster(), opt);
    opt.shared_pool = true;
    auto pool = RunReplay(TwoVcs(), TwoVcCluster(), opt);
    ASSERT_TRUE(parts.ok() && pool.ok()) << parts.status().ToString() << pool.status().ToString();
    const nlohmann::json p = ReplayMetrics(*parts), s = ReplayMetrics(*pool);
    EXPECT_EQ(p["mode"], "partitions");
    EXPECT_EQ(s["mode"], "shared-pool");
    EXPECT_EQ(s["jobs"], 3) << policy;
    EXPECT_DOUBLE_EQ(p["avg_jct_s"].get<double>(), (1000 + 2000 + 100) / 3.0) << policy;
    EXPECT_DOUBLE_EQ(s["avg_jct_s"].get<double>(), (1000 + 1130 + 100) / 3.0) << policy;
    EXPECT_DOUBLE_EQ(s["avg_runtime_s"].get<double>(), (1000 + 1000 + 100) / 3.0);
    EXPECT_EQ(s["preemptions"], 1) << policy;
    EXPECT_EQ(s["gpus"], 16);
    // The busy VC finishes sooner than on its own partition.
    EXPECT_DOUBLE_EQ(QueueNamed(p, "busy")["avg_jct_s"].get<double>(), 1500.0);
    EXPECT_DOUBLE_EQ(QueueNamed(s, "busy")["avg_jct_s"].get<double>(), 1065.0);
    // The idle VC got its guarantee when it asked: its job started on arrival.
    const nlohmann::json& idle = QueueNamed(s, "idle");
    EXPECT_EQ(idle["guarantee_gpus"], 8.0);
    EXPECT_EQ(idle["asked_within"], 1);
    EXPECT_EQ(idle["within_late"], 0);
    EXPECT_DOUBLE_EQ(idle["avg_queue_s"].get<double>(), 0.0);
    EXPECT_EQ(s["denied_cycles"], 0);
    EXPECT_EQ(s["within_late"], 0);
    // Busy asked for 16 GPUs at once: its first job was within its guarantee, the second not.
    EXPECT_EQ(QueueNamed(s, "busy")["asked_within"], 1);
    EXPECT_EQ(QueueNamed(s, "busy")["peak_borrowed_gpus"], 8.0);
    // GPU-hours: busy 8 x (1000 + 100 + 930) s, idle 8 x 100 s.
    EXPECT_NEAR(QueueNamed(s, "busy")["gpu_hours"].get<double>(), 8 * 2030 / 3600.0, 1e-9);
    EXPECT_NEAR(QueueNamed(s, "idle")["gpu_hours"].get<double>(), 8 * 100 / 3600.0, 1e-9);
    EXPECT_NEAR(QueueNamed(p, "busy")["gpu_hours"].get<double>(), 8 * 2000 / 3600.0, 1e-9);
  }
}

// Without reclaiming, the idle VC's job waits for the borrower to finish: the measures say so.
TEST(ReplaySharedPoolTest, MeasuresAGuaranteeNotHonoured) {
  ReplayOptions opt;
  opt.policy = *MakeReplayPolicy("fifo-backfill");
  opt.policy.scheduler.preemption.reclaim_quota = false;
  opt.shared_pool = true;
  auto r = RunReplay(TwoVcs(), TwoVcCluster(), opt);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const nlohmann::json m = ReplayMetrics(*r);
  const nlohmann::json& idle = QueueNamed(m, "idle");
  EXPECT_EQ(idle["asked_within"], 1);
  EXPECT_EQ(idle["within_late"], 1);
  EXPECT_DOUBLE_EQ(idle["within_wait_max_s"].get<double>(), 900.0);
  EXPECT_EQ(idle["denied_cycles"], 1);  // the cycle at 100; the next one, at 1000, starts it
  EXPECT_DOUBLE_EQ(idle["denied_s"].get<double>(), 900.0);
  EXPECT_EQ(QueueNamed(m, "busy")["denied_cycles"], 0);
  EXPECT_EQ(m["preemptions"], 0);
}

TEST(ReplaySharedPoolTest, NeedsNamedPartitions) {
  ReplayOptions opt;
  opt.policy = *MakeReplayPolicy("fifo");
  opt.shared_pool = true;
  std::vector<ClusterPartition> one = {{"", UniformCluster("one", 1)}};
  EXPECT_FALSE(RunReplay(TwoVcs(), one, opt).ok());
  std::vector<ClusterPartition> twice = {{"a", UniformCluster("a", 1)},
                                         {"a", UniformCluster("b", 1)}};
  EXPECT_FALSE(RunReplay(TwoVcs(), twice, opt).ok());
}

// A bigger mix: the pool is deterministic, runs every job, and no queue waits for its guarantee.
TEST(ReplaySharedPoolTest, ManyJobsKeepGuarantees) {
  std::vector<TraceJob> jobs;
  for (int i = 0; i < 600; ++i) {
    const char* vc = i % 5 == 0 ? "small" : i % 5 < 3 ? "mid" : "big";
    jobs.push_back(Job(i + 1, i * 13, 50 + (i * 97) % 1500, 1 << (i % 4), vc));
  }
  std::vector<ClusterPartition> vcs = {{"small", UniformCluster("small", 1)},
                                       {"mid", UniformCluster("mid", 2)},
                                       {"big", UniformCluster("big", 3)}};
  for (const char* policy : {"fifo-backfill", "sjf-oracle"}) {
    ReplayOptions opt;
    opt.policy = *MakeReplayPolicy(policy);
    auto parts = RunReplay(jobs, vcs, opt);
    opt.shared_pool = true;
    auto a = RunReplay(jobs, vcs, opt);
    auto b = RunReplay(jobs, vcs, opt);
    ASSERT_TRUE(parts.ok() && a.ok() && b.ok());
    nlohmann::json ma = ReplayMetrics(*a), mb = ReplayMetrics(*b), mp = ReplayMetrics(*parts);
    ma.erase("wall_s");
    mb.erase("wall_s");
    EXPECT_EQ(ma, mb) << policy;
    EXPECT_EQ(ma["jobs"], 600);
    EXPECT_EQ(ma["within_late"], 0) << policy;
    EXPECT_GT(ma["asked_within"].get<int64_t>(), 0);
    EXPECT_LT(ma["avg_jct_s"].get<double>(), mp["avg_jct_s"].get<double>()) << policy;
    double hours = 0;
    for (const auto& q : ma["queues"]) hours += q["gpu_hours"].get<double>();
    // The queues' GPU-hours add up to what the cluster ran.
    EXPECT_NEAR(hours,
                ma["gpu_util_pct"].get<double>() / 100 * 48 * ma["makespan_s"].get<double>() / 3600,
                1e-6);
  }
}

const std::string kOpenb = std::string(HANGAR_SOURCE_DIR) + "/data/traces/openb/";

TEST(OpenbReplayTest, ReadsPodsWithTheirTimes) {
  auto jobs = ReadOpenbTrace(kOpenb + "openb_pod_list_default.csv");
  ASSERT_TRUE(jobs.ok()) << jobs.status().ToString();
  EXPECT_EQ(jobs->size(), 8152u - 897u);  // the 897 Pending pods never ran
  // openb-pod-0001,6000,12288,1,460,,LS,Running,427061,12902960,427061
  const TraceJob& b = (*jobs)[1];
  EXPECT_EQ(b.row, 3u);
  EXPECT_EQ(b.submit, 427061 * kSecond);
  EXPECT_EQ(b.runtime, (12902960 - 427061) * kSecond);
  EXPECT_EQ(b.gpus_per_replica, 1);
  EXPECT_EQ(b.milli_gpu, 460);
  EXPECT_EQ(b.milli_cpu, 6000);
  EXPECT_EQ(b.memory_mib, 12288);
  EXPECT_TRUE(b.gpu_models.empty());
}

TEST(OpenbReplayTest, RefusesFilesWithoutTimes) {
  const std::string path = ::testing::TempDir() + "/multigpu.csv";
  std::ofstream(path) << "name,cpu_milli,memory_mib,num_gpu,gpu_milli\np-1,1000,1024,2,1000\n";
  auto jobs = ReadOpenbTrace(path);
  ASSERT_FALSE(jobs.ok());
  EXPECT_NE(jobs.status().message().find("creation_time"), std::string::npos)
      << jobs.status().message();
  const std::string bad = ::testing::TempDir() + "/bad_times.csv";
  std::ofstream(bad)
      << "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,"
         "deletion_time,scheduled_time\np-1,1000,1024,1,1000,V100M16,LS,Running,50,40,50\n";
  jobs = ReadOpenbTrace(bad);
  ASSERT_FALSE(jobs.ok());
  EXPECT_NE(jobs.status().message().find("bad_times.csv:2:"), std::string::npos)
      << jobs.status().message();
}

// `hangar sim replay --format openb` end to end: the shipped pods on the shipped nodes (found
// beside the pod list).
TEST(OpenbReplayTest, CommandReplaysTheShippedTrace) {
  const std::string json = ::testing::TempDir() + "/openb_replay.json";
  CLI::App app;
  int rc = 0;
  RegisterReplayCommand(app, &rc);
  app.parse("replay --format openb --trace " + kOpenb +
                "openb_pod_list_default.csv --policy fifo-backfill --json " + json,
            false);
  ASSERT_EQ(rc, 0);
  nlohmann::json m = nlohmann::json::parse(std::ifstream(json));
  EXPECT_EQ(m["format"], "openb");
  EXPECT_EQ(m["mode"], "cluster");
  EXPECT_EQ(m["gpus"], 6212);
  EXPECT_EQ(m["jobs"].get<int64_t>() + m["never"].get<int64_t>(), 8152 - 897);
  EXPECT_GT(m["jobs"].get<int64_t>(), 7000);
  EXPECT_GT(m["gpu_util_pct"].get<double>(), 0.0);
}

}  // namespace
}  // namespace hangar::sim
