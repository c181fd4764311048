// ClusterState as the scheduler's owner: what it hands the cycle (the snapshot) and how it reads
// the decisions back.
#include <gtest/gtest.h>

#include <map>

#include "cluster/cluster_yaml.h"
#include "controller/state/cluster_state.h"
#include "controller/state/state_test_util.h"
#include "sim/engine/simulator.h"

namespace hangar::controller {
namespace {

using testing::Spec;

class SchedOwnerTest : public ::testing::Test {
 protected:
  // One node of `gpus` GPUs, registered.
  void Start(sched::SchedulerConfig cfg, int gpus = 8) {
    auto f = cluster::ParseClusterYaml(
        "node_defaults: {gpus: " + std::to_string(gpus) +
            ", gpu_model: H100, gpu_memory: 80Gi, cpu: 64, memory: 512Gi}\n"
            "nodes: [{name: a}]\n",
        "c.yaml");
    ASSERT_TRUE(f.ok());
    topo_ = f->topology;
    ControllerOptions o;
    o.require_validation = false;
    auto s = sched::Scheduler::Create(cfg);
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    state_ = std::make_unique<ClusterState>(f->topology, o, std::move(s).value());
    pb::Register r;
    r.mutable_inventory()->set_node("a");
    for (int i = 0; i < gpus; ++i) r.mutable_inventory()->add_gpus()->set_index(i);
    Effects fx;
    ASSERT_TRUE(state_->OnRegister(r, 0, &fx).ok());
  }
  sched::JobId Submit(const std::string& yaml, Time now) {
    Effects fx;
    auto id = state_->Submit(Spec(yaml), now, &fx);
    EXPECT_TRUE(id.ok()) << id.status().ToString();
    return id.ok() ? *id : 0;
  }
  std::string StateOf(sched::JobId id) const { return state_->GetJob(id)->state; }
  std::string RuleOf(sched::JobId id) const { return state_->GetJob(id)->reason_rule; }
  void Task(const std::string& task, pb::TaskStatus::State st, Time now) {
    pb::TaskStatus s;
    s.set_task_id(task);
    s.set_state(st);
    Effects fx;
    EXPECT_TRUE(state_->OnTaskStatus("a", s, now, &fx).ok());
  }
  std::shared_ptr<const cluster::Topology> topo_;
  std::unique_ptr<ClusterState> state_;
};

// The cycle stops after one placement; the job it did not reach is the one that says so, not
// whichever job sits at that index of the controller's id-ordered list.
TEST_F(SchedOwnerTest, NotExaminedGoesToTheJobsTheCycleDidNotReach) {
  Start({.max_placements = 1});
  const auto low = Submit("name: low\npriority: 1\ntasks: [{gpus: 1, command: [x]}]\n", 1);
  const auto high = Submit("name: high\npriority: 9\ntasks: [{gpus: 1, command: [x]}]\n", 2);
  Effects fx;
  state_->Schedule(3, &fx);
  EXPECT_EQ(StateOf(high), "starting");
  EXPECT_EQ(StateOf(low), "pending");
  EXPECT_EQ(RuleOf(low), "not-examined");
}

constexpr const char* kFull = "tasks: [{gpus: 8, command: [x]}]\n";

// LAS in the controller: a job that already ran goes after a fresh one (and, with LAS
// preemption, makes room for it), because the cycle is told each job's attained service.
TEST_F(SchedOwnerTest, LasOrdersByAttainedService) {
  sched::SchedulerConfig cfg;
  cfg.queue_policy = "las";
  cfg.backfill = sched::BackfillMode::kNone;
  cfg.preemption.mode = sched::PreemptionMode::kLas;
  Start(cfg);
  const auto old_job = Submit(std::string("name: old\n") + kFull, 0);
  Effects fx;
  state_->Schedule(1, &fx);
  ASSERT_EQ(StateOf(old_job), "starting");
  Task("1.0.0", pb::TaskStatus::RUNNING, 2);
  // Two hours on 8 GPUs: 16 GPU-hours, service level 2; a fresh job is at level 0.
  const Time later = 2 * kHour;
  const auto fresh = Submit(std::string("name: fresh\n") + kFull, later);
  Effects preempt;
  state_->Schedule(later, &preempt);
  bool stop = false;
  for (const auto& m : preempt.messages)
    stop = stop || (m.message.has_stop() && m.message.stop().task_id() == "1.0.0");
  EXPECT_TRUE(stop) << "the fresh job preempts the one that ran";
  // Its task still stops (the checkpoint grace): the victim shows preempting until it has.
  EXPECT_EQ(StateOf(old_job), "preempting");
  EXPECT_EQ(
      state_->GetJob(old_job)->reason,
      "waiting for 1 task of its previous attempt to checkpoint and stop before it starts again");
  EXPECT_EQ(StateOf(fresh), "pending");
  pb::TaskStatus stopped;
  stopped.set_task_id("1.0.0");
  stopped.set_state(pb::TaskStatus::EXITED);
  stopped.set_stopped(true);
  stopped.set_signal(15);
  EXPECT_TRUE(state_->OnTaskStatus("a", stopped, later + kSecond, &fx).ok());
  ASSERT_EQ(StateOf(old_job), "pending");
  // Both wait now, the old one submitted first; LAS starts the fresh one.
  state_->Schedule(later + 2 * kSecond, &fx);
  EXPECT_EQ(StateOf(fresh), "starting");
  EXPECT_EQ(StateOf(old_job), "pending");
}

// Gittins in the controller: ranks come from the run times of finished jobs of each shape, so a
// job of a shape that finishes quickly goes before an earlier one of a shape that runs long.
TEST_F(SchedOwnerTest, GittinsRanksByLearnedRunTimes) {
  sched::SchedulerConfig cfg;
  cfg.queue_policy = "gittins";
  cfg.backfill = sched::BackfillMode::kNone;
  Start(cfg);
  const std::string quick = "name: quick\ntasks: [{gpus: 8, cpu: 1, command: [x]}]\n";
  const std::string slow = "name: slow\ntasks: [{gpus: 8, cpu: 2, command: [x]}]\n";
  Time now = 0;
  for (int k = 0; k < 20; ++k) {
    const bool is_quick = k % 2 == 0;
    const auto id = Submit(is_quick ? quick : slow, now);
    Effects fx;
    state_->Schedule(now + 1, &fx);
    ASSERT_EQ(StateOf(id), "starting") << k;
    const std::string task = std::to_string(id) + ".0.0";
    Task(task, pb::TaskStatus::RUNNING, now + 1);
    now += is_quick ? 10 * kSecond : 1000 * kSecond;
    Task(task, pb::TaskStatus::EXITED, now);
    ASSERT_EQ(StateOf(id), "succeeded") << k;
    now += kSecond;
  }
  const auto s = Submit(slow, now);
  const auto q = Submit(quick, now + 1);
  Effects fx;
  state_->Schedule(now + 2, &fx);
  EXPECT_EQ(StateOf(q), "starting");
  EXPECT_EQ(StateOf(s), "pending");
}

// The two owners agree: the same jobs through the simulator and through ClusterState (agents
// played by hand, run times known only to the driver) start at the same times, for the queue
// policies whose inputs the owners compute (attained service, Gittins ranks learned online).
struct TestJob {
  Time submit;
  Duration runtime;
  int gpus;
  int cpu;  // a second shape class
};

std::vector<TestJob> Workload() {
  std::vector<TestJob> jobs;
  uint64_t x = 12345;
  for (int i = 0; i < 40; ++i) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    const bool quick = (x >> 33) % 3 != 0;
    const Duration run = quick ? (10 + static_cast<Duration>((x >> 40) % 20)) * kSecond
                               : (300 + static_cast<Duration>((x >> 40) % 900)) * kSecond;
    jobs.push_back(
        {static_cast<Time>(i) * 20 * kSecond, run, (x >> 50) % 2 ? 8 : 4, quick ? 1 : 2});
  }
  return jobs;
}

std::string SpecOf(const TestJob& j) {
  return "name: j\ntasks: [{gpus: " + std::to_string(j.gpus) + ", cpu: " + std::to_string(j.cpu) +
         ", command: [x]}]\n";
}

std::vector<Time> StartsInSimulator(const sched::SchedulerConfig& cfg,
                                    std::shared_ptr<const cluster::Topology> t) {
  sim::SimConfig sc;
  sc.scheduler = cfg;
  sc.gittins_ranks = cfg.queue_policy == "gittins";
  sc.gittins_by_predecessor = sc.gittins_ranks;  // as the controller does by default
  auto s = std::move(sim::Simulator::Create(t, sc)).value();
  const std::vector<TestJob> jobs = Workload();
  for (size_t i = 0; i < jobs.size(); ++i) {
    sim::SimJob j;
    j.id = i + 1;
    j.seq = i + 1;
    j.request =
        std::make_shared<sched::GangRequest>(*sched::CompileGang(Spec(SpecOf(jobs[i])), *t));
    j.submit = jobs[i].submit;
    j.runtime = jobs[i].runtime;
    s->AddJob(std::move(j));
  }
  EXPECT_TRUE(s->Run().ok());
  std::vector<Time> starts;
  for (const auto& r : s->results()) starts.push_back(r.first_start);
  return starts;
}

TEST_F(SchedOwnerTest, SimulatorAndControllerStartTheSameJobsAtTheSameTimes) {
  {
    // The workload is one where the order matters: Gittins starts jobs other than FIFO's.
    Start({});
    sched::SchedulerConfig fifo, gittins;
    fifo.queue_policy = "fifo";
    gittins.queue_policy = "gittins";
    fifo.backfill = gittins.backfill = sched::BackfillMode::kNone;
    ASSERT_NE(StartsInSimulator(fifo, topo_), StartsInSimulator(gittins, topo_));
  }
  for (const char* policy : {"fifo", "las", "gittins"}) {
    SCOPED_TRACE(policy);
    sched::SchedulerConfig cfg;
    cfg.queue_policy = policy;
    cfg.backfill = sched::BackfillMode::kNone;
    cfg.preemption.mode = sched::PreemptionMode::kNone;
    Start(cfg);
    const std::vector<TestJob> jobs = Workload();
    std::vector<Time> starts(jobs.size(), kNever);
    std::multimap<Time, sched::JobId> ends;
    size_t next = 0;
    while (next < jobs.size() || !ends.empty()) {
      Time now = next < jobs.size() ? jobs[next].submit : kNever;
      if (!ends.empty()) now = std::min(now, ends.begin()->first);
      while (!ends.empty() && ends.begin()->first <= now) {
        Task(std::to_string(ends.begin()->second) + ".0.0", pb::TaskStatus::EXITED, now);
        ends.erase(ends.begin());
      }
      while (next < jobs.size() && jobs[next].submit <= now) Submit(SpecOf(jobs[next++]), now);
      Effects fx;
      state_->Schedule(now, &fx);
      for (sched::JobId id = 1; id <= next; ++id) {  // the jobs submitted so far
        if (starts[id - 1] != kNever || StateOf(id) != "starting") continue;
        starts[id - 1] = now;
        Task(std::to_string(id) + ".0.0", pb::TaskStatus::RUNNING, now);
        ends.emplace(now + jobs[id - 1].runtime, id);
      }
    }
    EXPECT_EQ(starts, StartsInSimulator(cfg, topo_));
  }
}

}  // namespace
}  // namespace hangar::controller
