// The recovery loop through the lean Simulator, worked by hand on a few nodes: scripted failures,
// exact times.
#include "sim/goodput_loop.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "sim/engine/simulator.h"

namespace hangar::sim {
namespace {

// Nodes 0-2 have two GPUs (the training job's), node 3 one GPU (a small job's), or two with
// `fourth_gpus` 2 (a spare). One leaf.
std::shared_ptr<const cluster::Topology> Cluster(int fourth_gpus) {
  cluster::TopologyBuilder b("t");
  for (int i = 0; i < 4; ++i) {
    cluster::NodeSpec n;
    n.name = "n" + std::to_string(i);
    n.gpus = i < 3 ? 2 : fourth_gpus;
    n.gpu_model = "H100";
    n.gpu_memory_mib = 80 * 1024;
    n.milli_cpu = 8000;
    n.memory_mib = 64 * 1024;
    b.AddNode(std::move(n));
  }
  return *std::move(b).Build();
}

SimJob Job(uint64_t id, Time submit, Duration runtime, int gpus, int replicas = 1) {
  sched::TaskShape s;
  s.kind = job::GpuKind::kWhole;
  s.gpus = gpus;
  s.milli = 1000;
  SimJob j;
  j.id = id;
  j.name = "j" + std::to_string(id);
  j.request = std::make_shared<sched::GangRequest>(sched::MakeSingleTaskRequest(s, replicas));
  j.submit = submit;
  j.runtime = runtime;
  j.seq = id;
  return j;
}

constexpr Duration kWork = 10 * kHour;

GoodputLoopConfig Config(RecoveryPolicy policy, std::vector<FailureEvent> failures) {
  GoodputLoopConfig c;
  c.policy = policy;
  c.rates = Llama3Rates();  // repair times only: the failures are scripted
  c.scripted = std::move(failures);
  c.checkpoint_interval = 40 * kMinute;
  c.restore = 5 * kMinute;
  c.detect = 10 * kSecond;
  c.replace = 15 * kSecond;
  c.other_restore = 30 * kSecond;
  c.straggler_detect = 5 * kMinute;
  return c;
}

// Runs the training job (index 0: three 2-GPU tasks, submitted at 0) and `others` under `loop`.
struct LoopRun {
  std::unique_ptr<Simulator> sim;
  std::unique_ptr<GoodputLoop> loop;
};
LoopRun RunLoop(std::shared_ptr<const cluster::Topology> topo, GoodputLoopConfig config,
                std::vector<SimJob> others) {
  SimConfig cfg;
  cfg.scheduler.queue_policy = "fifo";
  cfg.scheduler.strict_order = true;
  LoopRun r;
  r.sim = std::move(Simulator::Create(topo, cfg)).value();
  r.sim->AddJob(Job(1, 0, kWork, 2, 3));
  for (auto& j : others) r.sim->AddJob(std::move(j));
  r.loop = std::make_unique<GoodputLoop>(std::move(config), *topo, 0, kWork,
                                         job::TopologyConstraint{}, 0);
  SimObserver obs;
  GoodputLoop* loop = r.loop.get();
  obs.on_start = [loop](Time t, const SimJob& j, const sched::Placement& p) {
    loop->OnStart(t, j.id - 1, p.assignment);
  };
  obs.on_finish = [loop](Time t, const SimJob& j) { loop->OnFinish(t, j.id - 1); };
  r.sim->set_observer(std::move(obs));
  r.sim->set_disruptor(r.loop.get());
  EXPECT_TRUE(r.sim->Run().ok());
  return r;
}

std::vector<uint32_t> NodesOf(const cluster::GangAssignment& a) {
  std::vector<uint32_t> n;
  for (const auto& t : a.tasks) n.push_back(t.node);
  std::sort(n.begin(), n.end());
  return n;
}

constexpr Time kFail = 2 * kHour + 10 * kMinute;  // 10 minutes after a checkpoint (40m interval)

TEST(GoodputLoopTest, SparesTakeTheSpareFromUnderOpportunisticWorkAndRestartAtOnce) {
  GoodputLoopConfig c = Config(RecoveryPolicy::kSpares, {{kFail, 0, FailureKind::kGpu}});
  c.spares = {3};
  // j2 runs on the spare (the only free node) from 1h; j3 arrives after the failure.
  LoopRun r = RunLoop(Cluster(2), c, {Job(2, kHour, 5 * kHour, 2), Job(3, 3 * kHour, kHour, 1)});
  const TrainingLedger& l = r.loop->ledger();
  // Lost: 10 minutes of work; then detection, the replacement, the restore.
  const Time restart = kFail + 10 * kSecond;
  EXPECT_EQ(r.loop->job_end(), kWork + 10 * kMinute + 10 * kSecond + 15 * kSecond + 5 * kMinute);
  EXPECT_EQ(r.sim->results()[0].end, r.loop->job_end());
  EXPECT_EQ(l.lost_work(), 10 * kMinute);
  EXPECT_EQ(l.down(DownCause::kRecovery), 25 * kSecond);
  EXPECT_EQ(NodesOf(r.loop->gang()), (std::vector<uint32_t>{1, 2, 3}));  // its healthy nodes kept
  EXPECT_EQ(r.loop->counts().spares_taken, 1);
  EXPECT_EQ(r.loop->counts().spare_evictions, 1);
  // j2 had run 70m10s when the spare was taken: the 30m10s since its checkpoint are lost, and
  // it waits for nodes (node 0 is in repair) until the training job ends.
  const SimJobResult& j2 = r.sim->results()[1];
  const Duration left = (6 * kHour - restart) + 30 * kMinute + 10 * kSecond + 30 * kSecond;
  EXPECT_EQ(j2.end, r.loop->job_end() + left);
  EXPECT_EQ(r.sim->results()[2].end, r.loop->job_end() + kHour);
}

TEST(GoodputLoopTest, WithoutSparesTheGangHoldsItsNodesUntilOneIsFree) {
  // An InfiniBand link: node 0 is back after its 4-hour repair, and then the only node that fits.
  LoopRun r =
      RunLoop(Cluster(1), Config(RecoveryPolicy::kNoSpares, {{kFail, 0, FailureKind::kIbLink}}),
              {Job(2, 0, 5 * kHour, 1), Job(3, 3 * kHour, kHour, 1)});
  const TrainingLedger& l = r.loop->ledger();
  const Time back = kFail + 4 * kHour;
  EXPECT_EQ(r.loop->job_end(), back + 15 * kSecond + 5 * kMinute + (kWork - 2 * kHour));
  EXPECT_EQ(l.down(DownCause::kWaitForNode), back + 15 * kSecond - kFail);
  EXPECT_EQ(r.loop->counts().waits, 1);
  EXPECT_EQ(r.loop->counts().free_nodes_taken, 1);
  EXPECT_EQ(NodesOf(r.loop->gang()), (std::vector<uint32_t>{0, 1, 2}));
  EXPECT_DOUBLE_EQ(l.Ettr(r.loop->job_end()),
                   static_cast<double>(kWork) / static_cast<double>(r.loop->job_end()));
}

TEST(GoodputLoopTest, NaiveRequeueGoesBehindJobsThatWereWaiting) {
  // j3 (two 2-GPU tasks) waits from 1h behind the training job; after the failure the training
  // job is resubmitted behind it, so j3 runs first on the training job's healthy nodes.
  LoopRun r =
      RunLoop(Cluster(1), Config(RecoveryPolicy::kNaive, {{kFail, 0, FailureKind::kIbLink}}),
              {Job(2, 0, 5 * kHour, 1), Job(3, kHour, 3 * kHour, 2, 2)});
  const Time resubmitted = kFail + 10 * kSecond;
  EXPECT_EQ(r.sim->results()[2].first_start, resubmitted);
  const Time back = kFail + 4 * kHour;  // node 0 repaired; j3 ended before
  EXPECT_EQ(r.loop->job_end(), back + 5 * kMinute + (kWork - 2 * kHour));
  EXPECT_EQ(r.loop->ledger().down(DownCause::kQueue), back - kFail);
}

TEST(GoodputLoopTest, ASlowGpuSlowsTheJobUntilItsNodeIsSwappedAtACheckpoint) {
  GoodputLoopConfig c = Config(RecoveryPolicy::kSpares, {{kFail, 0, FailureKind::kSlowGpu}});
  c.spares = {3};
  LoopRun r = RunLoop(Cluster(2), c, {});
  const TrainingLedger& l = r.loop->ledger();
  // Named 5 minutes later, at 133.5 minutes of progress; swapped at the 160-minute checkpoint,
  // reached 30 minutes of progress (at 0.7) after the slowdown began.
  const Time swap = kFail + (30 * kMinute * 1000 + 699) / 700;
  EXPECT_EQ(l.lost_work(), 0);
  EXPECT_EQ(l.slowdown(), (swap - kFail) - 30 * kMinute);
  EXPECT_EQ(r.loop->job_end(), swap + 15 * kSecond + 5 * kMinute + (kWork - 160 * kMinute));
  EXPECT_EQ(NodesOf(r.loop->gang()), (std::vector<uint32_t>{1, 2, 3}));
}

TEST(GoodputLoopTest, ASoftwareFailureRestartsTheGangInPlace) {
  LoopRun r = RunLoop(Cluster(2),
                      Config(RecoveryPolicy::kNoSpares, {{kFail, 1, FailureKind::kSoftware}}), {});
  EXPECT_EQ(r.loop->job_end(), kWork + 10 * kMinute + 10 * kSecond + 15 * kSecond + 5 * kMinute);
  EXPECT_EQ(r.loop->counts().free_nodes_taken, 0);
  EXPECT_EQ(r.loop->ledger().interruptions(), 1);
}

}  // namespace
}  // namespace hangar::sim
