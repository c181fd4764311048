#include "sim/engine/simulator.h"

#include <gtest/gtest.h>

#include "cluster/cluster_yaml.h"
#include "common/random.h"
#include "job/queue_spec.h"
#include "sim/engine/sim_test_util.h"

namespace hangar::sim {
namespace {

using testing::Gpus;
using testing::Job;
using testing::OneNode;

// Worked by hand: one node of 4 GPUs, FIFO without backfill.
//   j1: 4 GPUs, t=0, runs 10  -> starts 0, ends 10
//   j2: 2 GPUs, t=1, runs 5   -> starts 10, ends 15
//   j3: 2 GPUs, t=2, runs 20  -> starts 10, ends 30
//   j4: 4 GPUs, t=3, runs 1   -> starts 30, ends 31
TEST(SimulatorTest, HandWorkedFifo) {
  SimConfig cfg;
  cfg.scheduler.queue_policy = "fifo";
  cfg.scheduler.strict_order = true;
  auto sim = std::move(Simulator::Create(OneNode(4), cfg)).value();
  sim->AddJob(Job(1, 0, 10, 4));
  sim->AddJob(Job(2, 1, 5, 2));
  sim->AddJob(Job(3, 2, 20, 2));
  sim->AddJob(Job(4, 3, 1, 4));
  ASSERT_TRUE(sim->Run().ok());
  const auto& r = sim->results();
  EXPECT_EQ(r[0].first_start, 0);
  EXPECT_EQ(r[0].end, 10);
  EXPECT_EQ(r[1].first_start, 10);
  EXPECT_EQ(r[1].end, 15);
  EXPECT_EQ(r[2].first_start, 10);
  EXPECT_EQ(r[2].end, 30);
  EXPECT_EQ(r[3].first_start, 30);
  EXPECT_EQ(r[3].end, 31);
  // GPU-ms busy: 4*10 + 2*5 + 2*20 + 4*1 = 94 GPU-ms.
  EXPECT_EQ(sim->busy_gpu_ms(), 94);
}

TEST(SimulatorTest, JobsThatCanNeverRunAreMarked) {
  auto sim = std::move(Simulator::Create(OneNode(4), {})).value();
  sim->AddJob(Job(1, 0, 10, 8));
  sim->AddJob(Job(2, 0, 10, 1));
  ASSERT_TRUE(sim->Run().ok());
  EXPECT_TRUE(sim->results()[0].never);
  EXPECT_FALSE(sim->results()[1].never);
  EXPECT_EQ(sim->results()[1].end, 10);
}

TEST(SimulatorTest, DuplicateIdsAreRefused) {
  auto sim = std::move(Simulator::Create(OneNode(4), {})).value();
  sim->AddJob(Job(1, 0, 10, 1));
  sim->AddJob(Job(1, 0, 10, 1));
  EXPECT_FALSE(sim->Run().ok());
}

SimConfig GittinsConfig() {
  SimConfig cfg;
  cfg.scheduler.queue_policy = "gittins";
  cfg.scheduler.backfill = sched::BackfillMode::kNone;
  cfg.scheduler.preemption.mode = sched::PreemptionMode::kGittins;
  cfg.gittins_ranks = true;
  return cfg;
}

// With nothing learned, ranks follow the age, as under least attained service: a fresh job
// preempts one that has run 100 s; the victim resumes after it and pays the 30 s restore.
TEST(SimulatorTest, GittinsWithoutHistoryPreemptsOldJobs) {
  auto sim = std::move(Simulator::Create(OneNode(1), GittinsConfig())).value();
  sim->AddJob(Job(1, 0, 1000 * kSecond, 1));
  sim->AddJob(Job(2, 100 * kSecond, 10 * kSecond, 1));
  ASSERT_TRUE(sim->Run().ok());
  const auto& r = sim->results();
  EXPECT_EQ(r[1].first_start, 100 * kSecond);
  EXPECT_EQ(r[1].end, 110 * kSecond);
  EXPECT_EQ(r[0].preemptions, 1);
  EXPECT_EQ(r[0].end, 1040 * kSecond);
}

// With a preemption grace, as in the controller: the victim keeps its GPU for the grace, the
// preemptor starts once it has stopped, and the victim queues again only then.
TEST(SimulatorTest, PreemptorStartsWhenItsVictimHasStopped) {
  SimConfig cfg = GittinsConfig();
  cfg.preemption_grace = 60 * kSecond;
  auto sim = std::move(Simulator::Create(OneNode(1), cfg)).value();
  sim->AddJob(Job(1, 0, 1000 * kSecond, 1));
  sim->AddJob(Job(2, 100 * kSecond, 10 * kSecond, 1));
  ASSERT_TRUE(sim->Run().ok());
  const auto& r = sim->results();
  EXPECT_EQ(r[1].first_start, 160 * kSecond);
  EXPECT_EQ(r[1].end, 170 * kSecond);
  EXPECT_EQ(r[0].preemptions, 1);
  EXPECT_EQ(r[0].end, (170 + 900 + 30) * kSecond);  // the 900 s it had left, plus the restore
  // GPU-ms busy: the victim's grace counts (it holds the GPU): 160 + 10 + 930 s.
  EXPECT_EQ(sim->busy_gpu_ms(), (160 + 10 + 930) * kSecond);
}

// Once ten jobs of the shape have all run 100 s, a job 90 s in is nearly done: a fresh one waits
// for it instead of preempting it.
TEST(SimulatorTest, GittinsLearnsThatOldJobsAreNearlyDone) {
  for (bool history : {false, true}) {
    auto sim = std::move(Simulator::Create(OneNode(1), GittinsConfig())).value();
    uint64_t id = 1;
    if (history) {
      for (int i = 0; i < 10; ++i) sim->AddJob(Job(id++, i * 200 * kSecond, 100 * kSecond, 1));
    }
    const uint64_t old_id = id;
    sim->AddJob(Job(id++, 3000 * kSecond, 100 * kSecond, 1));
    sim->AddJob(Job(id++, 3090 * kSecond, 100 * kSecond, 1));
    ASSERT_TRUE(sim->Run().ok());
    const SimJobResult& old = sim->results()[old_id - 1];
    const SimJobResult& fresh = sim->results()[old_id];
    if (history) {
      EXPECT_EQ(old.preemptions, 0);
      EXPECT_EQ(old.end, 3100 * kSecond);
      EXPECT_EQ(fresh.first_start, 3100 * kSecond);
    } else {
      EXPECT_EQ(old.preemptions, 1);
      EXPECT_EQ(fresh.first_start, 3090 * kSecond);
    }
  }
}

// By predecessor: ten 1000 s jobs then ten 10 s jobs of one shape teach the classes "after a long
// one" and "after a short one". Then P_A (1000 s) runs while A, P_B and B (10 s each) queue
// behind it, in that order, each the predecessor of the next. When P_A ends, A's predecessor is
// known to be long and A drops behind P_B; when P_B ends, B's is known to be short and B goes
// ahead of A. Ranked by shape alone, they run in submission order. (No preemption here.)
TEST(SimulatorTest, GittinsRanksByHowLongThePredecessorRan) {
  for (bool by_predecessor : {false, true}) {
    SimConfig cfg = GittinsConfig();
    cfg.scheduler.preemption.mode = sched::PreemptionMode::kNone;
    cfg.gittins_by_predecessor = by_predecessor;
    auto sim = std::move(Simulator::Create(OneNode(1), cfg)).value();
    uint64_t id = 1;
    for (int i = 0; i < 10; ++i) sim->AddJob(Job(id++, i * 2000 * kSecond, 1000 * kSecond, 1));
    for (int i = 0; i < 10; ++i)
      sim->AddJob(Job(id++, (20000 + i * 100) * kSecond, 10 * kSecond, 1));
    sim->AddJob(Job(21, 21000 * kSecond, 1000 * kSecond, 1));  // P_A
    sim->AddJob(Job(22, 21100 * kSecond, 10 * kSecond, 1));    // A
    sim->AddJob(Job(23, 21200 * kSecond, 10 * kSecond, 1));    // P_B
    sim->AddJob(Job(24, 21300 * kSecond, 10 * kSecond, 1));    // B
    ASSERT_TRUE(sim->Run().ok());
    const auto& r = sim->results();
    EXPECT_EQ(r[20].end, 22000 * kSecond);
    if (by_predecessor) {
      EXPECT_EQ(r[22].first_start, 22000 * kSecond) << "P_B";
      EXPECT_EQ(r[23].first_start, 22010 * kSecond) << "B";
      EXPECT_EQ(r[21].first_start, 22020 * kSecond) << "A";
    } else {
      EXPECT_EQ(r[21].first_start, 22000 * kSecond) << "A";
      EXPECT_EQ(r[22].first_start, 22010 * kSecond) << "P_B";
      EXPECT_EQ(r[23].first_start, 22020 * kSecond) << "B";
    }
  }
}

// Two saturated queues with fair-share weights 1 and 2 and no quotas: over a simulated day the
// GPU-hours they receive are 1:2 within 5%. Jobs of 1, 2 or 4 GPUs run 10 to 90 minutes; each
// queue has twice the cluster's day of work waiting from the start.
double WeightedRatio(Duration half_life, uint64_t seed = 7) {
  auto topo = cluster::ParseClusterYaml(
      "node_defaults: {gpus: 8, gpu_model: H100, gpu_memory: 80Gi, cpu: 128, memory: 1Ti}\n"
      "nodes:\n  - {name: \"n-[1-4]\"}\n",
      "t.yaml");
  EXPECT_TRUE(topo.ok());
  auto specs = job::ParseQueues(
      "queues:\n  - {name: light, weight: 1}\n  - {name: heavy, weight: 2}\n", "q.yaml");
  EXPECT_TRUE(specs.ok());
  auto tree = sched::queue::QueueTree::Build(*specs, *topo->topology);
  EXPECT_TRUE(tree.ok());
  SimConfig cfg;
  cfg.queues = *tree;
  cfg.share_half_life = half_life;
  auto sim = std::move(Simulator::Create(topo->topology, cfg)).value();
  Random rng(seed);
  uint64_t id = 0;
  for (const char* q : {"light", "heavy"}) {
    int64_t gpu_seconds = 0;
    while (gpu_seconds < 2 * 32 * 86400LL) {
      const int gpus = 1 << rng.Uniform(3);
      const Duration runtime = (600 + static_cast<int64_t>(rng.Uniform(4801))) * kSecond;
      SimJob j = Job(++id, static_cast<Time>(rng.Uniform(60)) * kSecond, runtime, gpus);
      j.queue = static_cast<uint32_t>((*tree)->FindLeaf(q));
      sim->AddJob(std::move(j));
      gpu_seconds += gpus * runtime / kSecond;
    }
  }
  std::vector<int64_t> at_day;
  SimObserver obs;
  obs.on_cycle = [&](Time now, int64_t, size_t) {
    if (at_day.empty() && now >= 86400 * kSecond) at_day = sim->queue_gpu_ms();
  };
  sim->set_observer(obs);
  EXPECT_TRUE(sim->Run().ok());
  EXPECT_FALSE(at_day.empty());
  const double light = static_cast<double>(at_day[(*tree)->FindLeaf("light")]);
  const double heavy = static_cast<double>(at_day[(*tree)->FindLeaf("heavy")]);
  EXPECT_GT(light + heavy, 0.97 * 32 * 86400.0 * 1000);  // the cluster stayed busy
  return heavy / light;
}

TEST(SimulatorTest, WeightedFairShareOverADay) {
  // The default half-life (30 min); three workloads.
  for (uint64_t seed : {1, 2, 3})
    EXPECT_NEAR(WeightedRatio(30 * kMinute, seed), 2.0, 0.1) << "seed " << seed;
}

}  // namespace
}  // namespace hangar::sim
