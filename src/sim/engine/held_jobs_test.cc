// Jobs held back and brought in by a Disruptor (SimControl::Submit, Withdraw).
#include <gtest/gtest.h>

#include <functional>
#include <map>

#include "cluster/cluster_yaml.h"
#include "sim/engine/simulator.h"

namespace hangar::sim {
namespace {

// Runs `acts` at their instants.
class Script : public Disruptor {
 public:
  explicit Script(std::map<Time, std::function<void(Time, SimControl&)>> acts)
      : acts_(std::move(acts)) {}
  Time NextEvent() const override { return acts_.empty() ? kNever : acts_.begin()->first; }
  void Act(Time now, SimControl& sim) override {
    while (!acts_.empty() && acts_.begin()->first <= now) {
      acts_.begin()->second(now, sim);
      acts_.erase(acts_.begin());
    }
  }

 private:
  std::map<Time, std::function<void(Time, SimControl&)>> acts_;
};

SimJob FourGpus(uint64_t id, Time submit, Duration runtime) {
  sched::TaskShape s;
  s.kind = job::GpuKind::kWhole;
  s.gpus = 4;
  s.milli = 1000;
  SimJob j;
  j.id = id;
  j.name = "j" + std::to_string(id);
  j.request = std::make_shared<sched::GangRequest>(sched::MakeSingleTaskRequest(s));
  j.submit = submit;
  j.runtime = runtime;
  j.seq = id;
  return j;
}

// One node of 4 GPUs. A is held back until 10 and withdrawn while it runs at 20 (B, waiting since
// 15, starts at once); C is withdrawn while it waits; A comes back at 40 with its 90 ms left.
TEST(HeldJobsTest, SubmitAndWithdrawMoveJobsInAndOutOfTheQueue) {
  auto f = cluster::ParseClusterYaml(
      "nodes:\n  - {name: n, gpus: 4, gpu_model: H100, gpu_memory: 80Gi, cpu: 64, memory: 512Gi}\n",
      "t.yaml");
  ASSERT_TRUE(f.ok());
  SimConfig cfg;
  cfg.scheduler.queue_policy = "fifo";
  auto sim = std::move(Simulator::Create(f->topology, cfg)).value();
  sim->AddJob(FourGpus(1, kNever, 100));  // A
  sim->AddJob(FourGpus(2, 15, 10));       // B
  sim->AddJob(FourGpus(3, 16, 10));       // C
  sim->AddJob(FourGpus(4, kNever, 10));   // D: never submitted
  std::vector<bool> held_at_22;
  Script script({{10, [](Time t, SimControl& s) { s.Submit(t, 0); }},
                 {20, [](Time t, SimControl& s) { s.Withdraw(t, 0); }},
                 {22,
                  [&](Time t, SimControl& s) {
                    s.Withdraw(t, 2);
                    for (size_t j = 0; j < 4; ++j) held_at_22.push_back(s.HeldBack(j));
                  }},
                 {40, [](Time t, SimControl& s) { s.Submit(t, 0); }}});
  sim->set_disruptor(&script);
  ASSERT_TRUE(sim->Run().ok());
  const auto& r = sim->results();
  EXPECT_EQ(r[0].first_start, 10);
  EXPECT_EQ(r[0].end, 130);
  EXPECT_EQ(r[1].first_start, 20);
  EXPECT_EQ(r[1].end, 30);
  EXPECT_EQ(r[2].first_start, kNever);
  EXPECT_EQ(r[2].end, kNever);
  EXPECT_FALSE(r[2].never);  // withdrawn, not stuck
  EXPECT_EQ(r[3].first_start, kNever);
  EXPECT_FALSE(r[3].never);
  EXPECT_EQ(held_at_22, (std::vector<bool>{true, false, true, true}));
  // GPU-ms: A 4 x (10 + 90), B 4 x 10.
  EXPECT_EQ(sim->busy_gpu_ms(), 440);
}

// A is preempted at 20 for B with a 10 ms grace, withdrawn while it stops and submitted again
// before it has stopped: it queues once, when it stops, and starts once more, after B.
TEST(HeldJobsTest, AJobSubmittedAgainWhileItStopsQueuesOnce) {
  auto f = cluster::ParseClusterYaml(
      "nodes:\n  - {name: n, gpus: 4, gpu_model: H100, gpu_memory: 80Gi, cpu: 64, memory: "
      "512Gi}\n",
      "t.yaml");
  ASSERT_TRUE(f.ok());
  SimConfig cfg;
  cfg.scheduler.queue_policy = "priority";
  cfg.scheduler.preemption.mode = sched::PreemptionMode::kPriority;
  cfg.preemption_grace = 10;
  cfg.restore_cost = 0;
  auto sim = std::move(Simulator::Create(f->topology, cfg)).value();
  sim->AddJob(FourGpus(1, 0, 100));  // A
  SimJob b = FourGpus(2, 20, 10);
  b.priority = 5;
  sim->AddJob(b);
  int a_starts = 0;
  SimObserver obs;
  obs.on_start = [&](Time, const SimJob& j, const sched::Placement&) { a_starts += j.id == 1; };
  sim->set_observer(std::move(obs));
  Script script({{25, [](Time t, SimControl& s) { s.Withdraw(t, 0); }},
                 {26, [](Time t, SimControl& s) { s.Submit(t, 0); }}});
  sim->set_disruptor(&script);
  ASSERT_TRUE(sim->Run().ok());
  EXPECT_EQ(a_starts, 2);
  EXPECT_EQ(sim->results()[1].first_start, 30);
  EXPECT_EQ(sim->results()[0].end, 120);
}

}  // namespace
}  // namespace hangar::sim
