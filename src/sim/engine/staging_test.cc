#include "sim/engine/staging.h"

#include <gtest/gtest.h>

#include "cluster/cluster_yaml.h"
#include "sim/engine/simulator.h"

namespace hangar::sim {
namespace {

constexpr int64_t kGB = 1'000'000'000;

StagingConfig Config(int64_t cache_bytes = 100 * kGB) {
  StagingConfig c;
  c.enabled = true;
  c.origin_bytes_per_s = 1e9;  // 1 GB/s: 10 GB take 10 s
  c.peer_bytes_per_s = 1e9;
  c.node_cache_bytes = cache_bytes;
  return c;
}

TEST(StagingModelTest, PinnedObjectsAreNeverEvicted) {
  StagingModel m(Config(10 * kGB), 1);
  const uint32_t a = m.Intern({{1, 8 * kGB}}), b = m.Intern({{2, 8 * kGB}}),
                 c = m.Intern({{3, 8 * kGB}});
  EXPECT_EQ(m.Stage(0, a, {0}, /*owner=*/1, false), 8000);
  // Room for object 2 would take evicting object 1, which job 1 needs: the cache overflows.
  m.Stage(0, b, {0}, 2, false);
  EXPECT_TRUE(m.Holds(0, 1));
  EXPECT_TRUE(m.Holds(0, 2));
  EXPECT_EQ(m.stats().evictions, 0);
  EXPECT_EQ(m.stats().overflows, 1);
  EXPECT_EQ(m.used_bytes(0), 16 * kGB);
  // Job 1 is done: object 1 may go (least recently used, unpinned), object 2 stays (job 2 runs).
  m.Unpin(1);
  m.Stage(20000, c, {0}, 3, false);
  EXPECT_FALSE(m.Holds(0, 1));
  EXPECT_TRUE(m.Holds(0, 2));
  EXPECT_TRUE(m.Holds(0, 3));
  EXPECT_EQ(m.stats().evictions, 1);
}

TEST(StagingModelTest, LeastRecentlyUsedGoesFirst) {
  StagingModel m(Config(20 * kGB), 1);
  const uint32_t a = m.Intern({{1, 8 * kGB}}), b = m.Intern({{2, 8 * kGB}}),
                 c = m.Intern({{3, 8 * kGB}});
  m.Stage(0, a, {0}, 1, false);
  m.Stage(0, b, {0}, 2, false);
  m.Unpin(1);
  m.Unpin(2);
  m.Stage(50000, a, {0}, 3, false);  // object 1 used again: object 2 is now the older
  m.Unpin(3);
  m.Stage(60000, c, {0}, 4, false);
  EXPECT_TRUE(m.Holds(0, 1));
  EXPECT_FALSE(m.Holds(0, 2));
}

TEST(StagingModelTest, PeerFanoutReadsTheOriginOnce) {
  const std::vector<uint32_t> nodes = {0, 1, 2, 3};
  StagingConfig c = Config();
  StagingModel fan(c, 4);
  // Four nodes at once: the first copy from the origin (10 s), the others from it as it arrives.
  EXPECT_EQ(fan.Stage(0, fan.Intern({{7, 10 * kGB}}), nodes, 1, false), 10000);
  EXPECT_EQ(fan.stats().origin_bytes, 10 * kGB);
  EXPECT_EQ(fan.stats().origin_transfers, 1);
  EXPECT_EQ(fan.stats().transfers, 4);
  EXPECT_EQ(fan.stats().peer_bytes, 30 * kGB);
  c.peer_fanout = false;
  StagingModel origin(c, 4);
  // Without fan-out the origin serves four copies: the last is complete after 40 s.
  EXPECT_EQ(origin.Stage(0, origin.Intern({{7, 10 * kGB}}), nodes, 1, false), 40000);
  EXPECT_EQ(origin.stats().origin_bytes, 40 * kGB);
}

TEST(StagingModelTest, SecondsForCountsMissingBytes) {
  StagingModel m(Config(), 2);
  const uint32_t s = m.Intern({{1, 10 * kGB}, {2, 5 * kGB}});
  m.Preload(1, {1, 10 * kGB}, 0);
  const std::vector<uint16_t>* secs = m.SecondsFor(s);
  ASSERT_EQ(secs->size(), 2u);
  EXPECT_EQ((*secs)[0], 15);  // both from a peer or the origin at 1 GB/s
  EXPECT_EQ((*secs)[1], 5);   // only object 2
  m.Preload(0, {2, 5 * kGB}, 0);
  m.Refresh();
  EXPECT_EQ((*m.SecondsFor(s))[0], 10);
}

std::shared_ptr<const cluster::Topology> Nodes(int n) {
  std::string yaml = "nodes:\n";
  for (int i = 0; i < n; ++i) {
    yaml += "  - {name: n" + std::to_string(i) +
            ", gpus: 8, gpu_model: H100, gpu_memory: 80Gi, cpu: 64, memory: 512Gi}\n";
  }
  auto f = cluster::ParseClusterYaml(yaml, "t.yaml");
  EXPECT_TRUE(f.ok());
  return f->topology;
}

SimJob Job(uint64_t id, Time submit, Duration runtime, int gpus,
           std::vector<SimArtifact> artifacts = {}) {
  sched::TaskShape s;
  s.kind = job::GpuKind::kWhole;
  s.gpus = gpus;
  s.milli = 1000;
  SimJob j;
  j.id = id;
  j.name = "j" + std::to_string(id);
  j.request = std::make_shared<sched::GangRequest>(sched::MakeSingleTaskRequest(s));
  j.submit = submit;
  j.runtime = runtime;
  j.seq = id;
  j.artifacts = std::move(artifacts);
  return j;
}

SimConfig Fifo(bool data_aware, bool prestage) {
  SimConfig cfg;
  cfg.scheduler.queue_policy = "fifo";
  cfg.scheduler.placement_policy = "best-fit";
  cfg.staging = Config();
  cfg.staging.data_aware = data_aware;
  cfg.staging.prestage = prestage;
  return cfg;
}

// One node, 8 GPUs, 10 GB at 1 GB/s: the job holds 8 GPUs for 10 s before it runs, 80 GPU-s.
TEST(SimulatorStagingTest, LostGpuTimeIsGpusTimesStagingSeconds) {
  auto sim = std::move(Simulator::Create(Nodes(1), Fifo(false, false))).value();
  sim->AddJob(Job(1, 0, 100 * kSecond, 8, {{1, 10 * kGB}}));
  sim->AddJob(Job(2, 200 * kSecond, 100 * kSecond, 8, {{1, 10 * kGB}}));  // warm: no staging
  ASSERT_TRUE(sim->Run().ok());
  const auto& r = sim->results();
  EXPECT_EQ(r[0].first_start, 0);
  EXPECT_EQ(r[0].end, 110 * kSecond);
  EXPECT_EQ(r[0].staging, 10 * kSecond);
  EXPECT_EQ(r[1].end, 300 * kSecond);
  EXPECT_EQ(r[1].staging, 0);
  const StagingStats st = sim->staging_stats();
  EXPECT_EQ(st.lost_gpu_ms, 8 * 10 * kSecond);
  EXPECT_EQ(st.staged_starts, 1);
  EXPECT_EQ(st.starts_with_objects, 2);
  EXPECT_EQ(st.origin_bytes, 10 * kGB);
  // The GPUs were held while staging: busy time counts them.
  EXPECT_EQ(sim->busy_gpu_ms(), 8 * (110 + 100) * kSecond);
}

// Two nodes; a 4-GPU job without data runs on one of them, and the other holds object 1. The
// 4-GPU job that needs object 1: best fit alone packs it beside the first (and stages 10 s);
// data-aware placement puts it where the object is and it starts at once.
struct TwoNodeRun {
  uint32_t first_node = 0, second_node = 0;
  SimJobResult second;
};

TwoNodeRun RunTwoNodes(bool data_aware) {
  TwoNodeRun out;
  auto sim = std::move(Simulator::Create(Nodes(2), Fifo(data_aware, false))).value();
  sim->AddJob(Job(1, 0, 1000 * kSecond, 4));
  sim->AddJob(Job(2, kSecond, 100 * kSecond, 4, {{1, 10 * kGB}}));
  Simulator* s = sim.get();
  SimObserver obs;
  obs.on_start = [&](Time t, const SimJob& j, const sched::Placement& p) {
    if (j.id == 1) {
      out.first_node = p.assignment.tasks[0].node;
      s->staging_model()->Preload(1 - out.first_node, {1, 10 * kGB}, t);
    } else {
      out.second_node = p.assignment.tasks[0].node;
    }
  };
  sim->set_observer(obs);
  EXPECT_TRUE(sim->Run().ok());
  out.second = sim->results()[1];
  return out;
}

TEST(SimulatorStagingTest, DataAwarePlacementPicksTheNodeHoldingTheObject) {
  const TwoNodeRun on = RunTwoNodes(true), off = RunTwoNodes(false);
  EXPECT_NE(on.second_node, on.first_node);
  EXPECT_EQ(on.second.staging, 0);
  EXPECT_EQ(on.second.end, kSecond + 100 * kSecond);
  EXPECT_EQ(off.second_node, off.first_node);
  EXPECT_EQ(off.second.staging, 10 * kSecond);
  EXPECT_EQ(off.second.end, kSecond + 10 * kSecond + 100 * kSecond);
}

// FIFO with backfill, one node: job 1 holds it for 100 s; job 2 (which needs 10 GB) is reserved
// the node at t=1 s. Pre-staging fetches its object meanwhile, so it runs from t=100 s; without,
// it stages from 100 s to 110 s holding 8 GPUs.
SimJobResult RunReserved(bool prestage, StagingStats* st) {
  SimConfig cfg = Fifo(false, prestage);
  cfg.scheduler.backfill = sched::BackfillMode::kEasy;
  auto sim = std::move(Simulator::Create(Nodes(1), cfg)).value();
  SimJob a = Job(1, 0, 100 * kSecond, 8), b = Job(2, kSecond, 50 * kSecond, 8, {{1, 10 * kGB}});
  a.time_limit = 100 * kSecond;
  b.time_limit = 50 * kSecond;
  sim->AddJob(a);
  sim->AddJob(b);
  EXPECT_TRUE(sim->Run().ok());
  *st = sim->staging_stats();
  return sim->results()[1];
}

TEST(SimulatorStagingTest, PrestagingMakesAReservedJobStartWarm) {
  StagingStats with, without;
  const SimJobResult on = RunReserved(true, &with), off = RunReserved(false, &without);
  EXPECT_EQ(on.first_start, 100 * kSecond);
  EXPECT_EQ(on.end, 150 * kSecond);
  EXPECT_EQ(on.staging, 0);
  EXPECT_EQ(with.lost_gpu_ms, 0);
  EXPECT_EQ(with.prestage_transfers, 1);
  EXPECT_EQ(off.end, 160 * kSecond);
  EXPECT_EQ(without.lost_gpu_ms, 80 * kSecond);
}

TEST(SimulatorStagingTest, RefusesEmptyObjects) {
  auto sim = std::move(Simulator::Create(Nodes(1), Fifo(true, true))).value();
  sim->AddJob(Job(1, 0, kSecond, 1, {{1, 0}}));
  const Status s = sim->Run();
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("sizes must be above 0"), std::string::npos);
}

}  // namespace
}  // namespace hangar::sim
