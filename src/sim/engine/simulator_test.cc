#include "sim/engine/simulator.h"

#include <gtest/gtest.h>

#include "cluster/cluster_yaml.h"

namespace hangar::sim {
namespace {

std::shared_ptr<const cluster::Topology> OneNode(int gpus) {
  auto f = cluster::ParseClusterYaml(
      "nodes:\n  - {name: n, gpus: " + std::to_string(gpus) +
          ", gpu_model: H100, gpu_memory: 80Gi, cpu: 64, memory: 512Gi}\n",
      "t.yaml");
  EXPECT_TRUE(f.ok());
  return f->topology;
}

std::shared_ptr<const sched::GangRequest> Gpus(int n) {
  sched::TaskShape s;
  s.kind = job::GpuKind::kWhole;
  s.gpus = n;
  s.milli = 1000;
  return std::make_shared<sched::GangRequest>(sched::MakeSingleTaskRequest(s));
}

SimJob Job(uint64_t id, Time submit, Duration runtime, int gpus) {
  SimJob j;
  j.id = id;
  j.name = "j" + std::to_string(id);
  j.request = Gpus(gpus);
  j.submit = submit;
  j.runtime = runtime;
  j.seq = id;
  return j;
}

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

}  // namespace
}  // namespace hangar::sim
