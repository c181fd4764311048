// Queues in the controller: applying the tree, guarantees reclaimed by preemption with the
// checkpoint protocol, idle reclamation from telemetry, and accounting.
#include <gtest/gtest.h>

#include "cluster/cluster_yaml.h"
#include "controller/state/cluster_state.h"
#include "controller/state/state_test_util.h"

namespace hangar::controller {
namespace {

using testing::Spec;

std::vector<job::QueueSpec> Queues(const std::string& yaml) {
  auto q = job::ParseQueues(yaml, "queues.yaml");
  EXPECT_TRUE(q.ok()) << q.status().ToString();
  return *q;
}

constexpr const char* kTree =
    "queues:\n"
    "  - name: train\n    quota: {gpus: 8}\n"
    "  - name: adhoc\n    idle: {gpu_util_below: 5, for: 10m, action: checkpoint-requeue}\n"
    "  - name: notebooks\n    idle: {gpu_util_below: 5, for: 10m, action: stop}\n";

class QueuesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto topology = testing::TwoNodeTopology();
    ASSERT_TRUE(topology);
    ControllerOptions o;
    o.require_validation = false;
    state_ = std::make_unique<ClusterState>(topology, o,
                                            std::move(sched::Scheduler::Create({})).value());
    Effects fx;
    for (const char* n : {"a", "b"}) {
      pb::Register r;
      r.mutable_inventory()->set_node(n);
      for (int i = 0; i < 8; ++i) r.mutable_inventory()->add_gpus()->set_index(i);
      ASSERT_TRUE(state_->OnRegister(r, 0, &fx).ok());
    }
    nlohmann::json summary;
    ASSERT_TRUE(state_->ApplyQueues(Queues(kTree), 0, &fx, &summary).ok());
  }
  sched::JobId Submit(const std::string& yaml, Time now) {
    Effects fx;
    auto id = state_->Submit(Spec(yaml), now, &fx);
    EXPECT_TRUE(id.ok()) << id.status().ToString();
    return id.ok() ? *id : 0;
  }
  void Running(const std::string& node, const std::string& task, Time now) {
    pb::TaskStatus s;
    s.set_task_id(task);
    s.set_state(pb::TaskStatus::RUNNING);
    Effects fx;
    EXPECT_TRUE(state_->OnTaskStatus(node, s, now, &fx).ok());
  }
  void Exited(const std::string& node, const std::string& task, Time now, Effects* fx) {
    pb::TaskStatus s;
    s.set_task_id(task);
    s.set_state(pb::TaskStatus::EXITED);
    s.set_stopped(true);
    s.set_signal(15);
    EXPECT_TRUE(state_->OnTaskStatus(node, s, now, fx).ok());
  }
  void Utilisation(const std::string& node, uint32_t util, Time now) {
    pb::Heartbeat hb;
    for (int i = 0; i < 8; ++i) {
      auto* g = hb.add_gpus();
      g->set_index(i);
      g->set_util_pct(util);
    }
    state_->OnHeartbeat(node, hb, now);
  }
  static const pb::Stop* StopOf(const Effects& fx, const std::string& task) {
    for (const auto& m : fx.messages) {
      if (m.message.has_stop() && m.message.stop().task_id() == task) return &m.message.stop();
    }
    return nullptr;
  }
  std::unique_ptr<ClusterState> state_;
};

TEST_F(QueuesTest, ApplyIsIdempotentAndRefusesWhatWouldLoseJobs) {
  Effects fx;
  nlohmann::json summary;
  ASSERT_TRUE(state_->ApplyQueues(Queues(kTree), 1, &fx, &summary).ok());
  EXPECT_TRUE(fx.batch.empty());  // nothing changed, nothing written
  EXPECT_EQ(summary["unchanged"].size(), 3u);
  Submit("name: j\nqueue: adhoc\ntasks: [{gpus: 1, command: [x]}]\n", 2);
  Status s = state_->ApplyQueues(Queues("queues:\n  - name: train\n"), 3, &fx, &summary);
  EXPECT_EQ(s.message(),
            "queue 'adhoc' has 1 unfinished jobs and the new tree has no leaf queue of that name; "
            "keep it, or cancel "
            "its jobs (`hangar jobs`) and apply again");
  s = state_->ApplyQueues(Queues("queues:\n  - name: adhoc\n    quota: {gpus: 17}\n"), 3, &fx,
                          &summary);
  EXPECT_EQ(s.message(),
            "the queues guarantee GPUs (milli) 17000 but the cluster has 16000; lower the quotas "
            "so every guarantee "
            "can be honoured at once");
  Effects bad;
  auto group =
      state_->Submit(Spec("name: j\nqueue: nope\ntasks: [{gpus: 1, command: [x]}]\n"), 4, &bad);
  EXPECT_EQ(group.status().message(),
            "queue 'nope' does not exist; the queues are: train, adhoc, notebooks");
  // A change is written and reported.
  ASSERT_TRUE(
      state_->ApplyQueues(Queues(std::string(kTree) + "  - name: extra\n"), 5, &fx, &summary).ok());
  EXPECT_EQ(summary["created"], nlohmann::json::array({"extra"}));
  ASSERT_EQ(fx.batch.values.size(), 1u);
  EXPECT_EQ(fx.batch.values[0].table, "queue");
}

// A borrower holds the whole cluster; a guaranteed job of `train` preempts it with the checkpoint
// protocol, waits for its GPUs without preempting more, and starts once they are free.
TEST_F(QueuesTest, GuaranteeIsReclaimedWithTheCheckpointProtocol) {
  const auto borrower =
      Submit("name: big\nqueue: adhoc\ntasks: [{replicas: 2, gpus: 8, command: [x]}]\n", 1);
  Effects fx;
  state_->Schedule(2, &fx);
  Running("a", "1.0.0", 3 * kSecond);
  Running("b", "1.0.1", 3 * kSecond);
  ASSERT_EQ(state_->GetJob(borrower)->state, "running");
  const auto train =
      Submit("name: t\nqueue: train\ntasks: [{gpus: 8, command: [x]}]\n", 100 * kSecond);
  Effects cycle;
  state_->Schedule(100 * kSecond, &cycle);
  // The borrower is requeued whole, each task told to checkpoint first.
  EXPECT_EQ(state_->GetJob(borrower)->state, "preempting");
  for (const char* task : {"1.0.0", "1.0.1"}) {
    const pb::Stop* stop = StopOf(cycle, task);
    ASSERT_NE(stop, nullptr) << task;
    EXPECT_EQ(stop->checkpoint_signal(), 10);  // SIGUSR1
  }
  auto j = state_->GetJob(train);
  EXPECT_EQ(j->state, "pending");
  EXPECT_EQ(j->reason, "waiting for 1 preempted job to checkpoint and stop");
  EXPECT_NE(state_->GetJob(borrower)->message.find(
                "preempted for job 2: job 2 reclaims queue train's guarantee"),
            std::string::npos);
  // Nothing more is preempted while it waits, and nothing starts on GPUs still held.
  Effects again;
  state_->Schedule(101 * kSecond, &again);
  EXPECT_EQ(state_->GetJob(train)->state, "pending");
  // The victim's tasks stop; the guaranteed job starts.
  Effects exits;
  Exited("a", "1.0.0", 102 * kSecond, &exits);
  Exited("b", "1.0.1", 102 * kSecond, &exits);
  Effects after;
  state_->Schedule(103 * kSecond, &after);
  EXPECT_EQ(state_->GetJob(train)->state, "starting");
  // The borrower may use what train does not: it waits on its queue's room, not forever.
  EXPECT_EQ(state_->GetJob(borrower)->state, "pending");
  // Accounting: the preempted attempt's GPU time and the work it lost since it started.
  auto usage = state_->UsageJson("queue", 0, 200 * kSecond);
  ASSERT_TRUE(usage.ok());
  double lost = -1;
  for (const auto& row : (*usage)["rows"]) {
    if (row["queue"] == "adhoc") lost = row["lost_to_preemption_gpu_hours"].get<double>();
  }
  EXPECT_NEAR(lost, 16.0 * 97 / 3600, 1e-6);  // 16 GPUs from t=3 s to t=100 s
}

TEST_F(QueuesTest, ACheckpointLowersTheLostWork) {
  Submit("name: big\nqueue: adhoc\ntasks: [{replicas: 2, gpus: 8, command: [x]}]\n", 1);
  Effects fx;
  state_->Schedule(2, &fx);
  Running("a", "1.0.0", 3);
  Running("b", "1.0.1", 3);
  pb::CheckpointDone c;
  c.set_task_id("1.0.0");
  c.set_path("/ckpt/step-100");
  EXPECT_TRUE(state_->OnCheckpointDone("a", c, 90 * kSecond, &fx).ok());
  Submit("name: t\nqueue: train\ntasks: [{gpus: 8, command: [x]}]\n", 100 * kSecond);
  state_->Schedule(100 * kSecond, &fx);
  auto usage = state_->UsageJson("user", 0, 200 * kSecond);
  ASSERT_TRUE(usage.ok());
  EXPECT_NEAR((*usage)["rows"][0]["lost_to_preemption_gpu_hours"].get<double>(), 16.0 * 10 / 3600,
              1e-6);
}

// Issue 19: a checkpoint the agent could not drain from node-local scratch to the shared store is
// not durable: an event says so, and the lost work still counts from the last durable one.
TEST_F(QueuesTest, ACheckpointThatFailedToDrainIsNotDurable) {
  Submit("name: big\nqueue: adhoc\ntasks: [{replicas: 2, gpus: 8, command: [x]}]\n", 1);
  Effects fx;
  state_->Schedule(2, &fx);
  Running("a", "1.0.0", 3);
  Running("b", "1.0.1", 3);
  pb::CheckpointDone durable;
  durable.set_task_id("1.0.0");
  durable.set_path("/store/job-1/step-50");
  durable.set_step(50);
  durable.set_drained(true);
  durable.set_drain_ms(1234);
  Effects first;
  EXPECT_TRUE(state_->OnCheckpointDone("a", durable, 50 * kSecond, &first).ok());
  ASSERT_EQ(first.batch.events.size(), 1u);
  EXPECT_EQ(first.batch.events[0].message,
            "checkpoint written by task 0 on a: /store/job-1/step-50 (step 50), drained to the "
            "shared store in 1234 ms");
  pb::CheckpointDone failed;
  failed.set_task_id("1.0.0");
  failed.set_step(90);
  failed.set_drain_error("draining /scratch/job-1 to /store/job-1: no space left on device");
  Effects second;
  EXPECT_TRUE(state_->OnCheckpointDone("a", failed, 90 * kSecond, &second).ok());
  ASSERT_EQ(second.batch.events.size(), 1u);
  EXPECT_EQ(second.batch.events[0].message,
            "checkpoint of task 0 on a (step 90) is NOT durable: draining /scratch/job-1 to "
            "/store/job-1: no space "
            "left on device; a restart resumes from the previous checkpoint in the store");
  Submit("name: t\nqueue: train\ntasks: [{gpus: 8, command: [x]}]\n", 100 * kSecond);
  state_->Schedule(100 * kSecond, &fx);
  auto usage = state_->UsageJson("user", 0, 200 * kSecond);
  ASSERT_TRUE(usage.ok());
  // From t=50 s (the durable one), not t=90 s.
  EXPECT_NEAR((*usage)["rows"][0]["lost_to_preemption_gpu_hours"].get<double>(), 16.0 * 50 / 3600,
              1e-6);
}

// Issue 15: with free capacity and nobody waiting, checkpoint-requeue would restart the idle job
// where it is, every `for` (killing a notebook's kernel for nothing): it is kept, and told once.
TEST_F(QueuesTest, AnIdleJobIsNotRequeuedWhenNobodyWaitsForGpus) {
  const auto idle = Submit("name: idle\nqueue: adhoc\ntasks: [{gpus: 8, command: [x]}]\n", 1);
  Effects fx;
  state_->Schedule(2, &fx);
  Running("a", "1.0.0", 3);
  Effects tick;
  for (Time t = 10 * kSecond; t <= 31 * kMinute; t += 30 * kSecond) {
    Utilisation("a", 0, t);
    state_->ReclaimIdle(t, &tick);
  }
  EXPECT_EQ(state_->GetJob(idle)->state, "running");
  EXPECT_EQ(StopOf(tick, "1.0.0"), nullptr);
  int kept = 0;
  for (const auto& e : tick.batch.events)
    kept += e.message.find("kept running, since no job waits for GPUs") != std::string::npos;
  EXPECT_EQ(kept, 1);
  // Once a job waits for GPUs, the idle one makes room.
  Submit("name: waiter\nqueue: adhoc\ntasks: [{replicas: 2, gpus: 8, command: [x]}]\n",
         31 * kMinute);
  state_->ReclaimIdle(31 * kMinute + 30 * kSecond, &tick);
  EXPECT_EQ(state_->GetJob(idle)->state, "preempting");
  EXPECT_NE(StopOf(tick, "1.0.0"), nullptr);
}

TEST_F(QueuesTest, IdleJobsAreReclaimedPerTheirQueuesPolicy) {
  const auto idle = Submit("name: idle\nqueue: adhoc\ntasks: [{gpus: 8, command: [x]}]\n", 1);
  const auto notebook = Submit("name: nb\nqueue: notebooks\ntasks: [{gpus: 8, command: [x]}]\n", 1);
  Effects fx;
  state_->Schedule(2, &fx);
  Running("a", "1.0.0", 3);
  Running("b", "2.0.0", 3);
  Submit("name: waiter\nqueue: adhoc\ntasks: [{gpus: 8, command: [x]}]\n",
         4);  // someone waits for GPUs
  Effects tick;
  for (Time t = 10 * kSecond; t <= 11 * kMinute; t += 30 * kSecond) {
    Utilisation("a", 0, t);
    Utilisation("b", t < 5 * kMinute ? 80 : 2, t);  // the notebook went idle at 5 min
    state_->ReclaimIdle(t, &tick);
  }
  // The adhoc job was idle for 10 minutes: checkpointed and requeued, with the reason.
  auto j = state_->GetJob(idle);
  EXPECT_EQ(j->state, "preempting");
  EXPECT_EQ(j->message.rfind("reclaimed: its GPUs stayed below 5% utilisation for 10m", 0), 0u)
      << j->message;
  ASSERT_NE(StopOf(tick, "1.0.0"), nullptr);
  EXPECT_EQ(StopOf(tick, "1.0.0")->checkpoint_signal(), 10);
  // The notebook has been idle only 6 minutes: still running.
  EXPECT_EQ(state_->GetJob(notebook)->state, "running");
  for (Time t = 11 * kMinute + 30 * kSecond; t <= 16 * kMinute; t += 30 * kSecond) {
    Utilisation("b", 2, t);
    state_->ReclaimIdle(t, &tick);
  }
  j = state_->GetJob(notebook);
  EXPECT_EQ(j->state, "cancelled");
  EXPECT_NE(j->message.find("queue notebooks: its idle policy, stop"), std::string::npos);
  // The idle GPU time is waste in the accounting.
  auto usage = state_->UsageJson("queue", 0, 16 * kMinute);
  ASSERT_TRUE(usage.ok());
  for (const auto& row : (*usage)["rows"]) {
    if (row["queue"] == "adhoc") {
      EXPECT_GT(row["idle_gpu_hours"].get<double>(), 8.0 * 9.5 / 60);
    }
    if (row["queue"] == "notebooks") {
      EXPECT_GT(row["idle_gpu_hours"].get<double>(), 8.0 * 10.5 / 60);
    }
  }
}

TEST_F(QueuesTest, ShareSaysWhyTheHeadJobWaits) {
  Submit("name: big\nqueue: adhoc\ntasks: [{replicas: 2, gpus: 8, command: [x]}]\n", 1);
  Submit("name: more\nqueue: adhoc\ntasks: [{gpus: 8, command: [x]}]\n", 1);
  Effects fx;
  state_->Schedule(2, &fx);
  nlohmann::json share = state_->ShareJson(3);
  bool seen = false;
  for (const auto& q : share["queues"]) {
    if (q["name"] != "adhoc") continue;
    seen = true;
    EXPECT_EQ(q["in_use_gpus"], 16.0);
    EXPECT_EQ(q["borrowed_gpus"], 16.0);
    EXPECT_EQ(q["pending"], 1);
    EXPECT_EQ(q["head_waits"],
              "queue adhoc may start 0 GPUs more now and the job needs 8 GPUs (the rest is in use, "
              "or guaranteed to "
              "queues that do not lend it)");
  }
  EXPECT_TRUE(seen);
  for (const auto& q : share["queues"]) {
    if (q["name"] == "train") {
      EXPECT_EQ(q["lent_gpus"], 8.0);
    }
  }
}

// Issue 16: tasks run as their user, never as root unless the queue allows it; the Launch says
// who, and whether root is allowed, so that the agent can hold to it too.
TEST_F(QueuesTest, TasksRunAsTheirUserAndAsRootOnlyWhereTheQueueAllowsIt) {
  Effects fx;
  nlohmann::json summary;
  ASSERT_TRUE(
      state_
          ->ApplyQueues(Queues(std::string(kTree) + "  - name: ops\n    allow_root: true\n"), 1,
                        &fx, &summary)
          .ok());
  auto as = [](const std::string& yaml, job::RunAs who) {
    job::JobSpec s = Spec(yaml);
    s.run_as = std::move(who);
    return s;
  };
  const job::RunAs root{"", 0u, 0, {}}, alice{"", 61001u, 61002, {61010}},
      named{"root", std::nullopt, 0, {}};
  for (const job::RunAs& who : {root, named}) {
    auto refused = state_->Submit(
        as("name: fix\nqueue: adhoc\ntasks: [{gpus: 1, command: [x]}]\n", who), 2, &fx);
    ASSERT_FALSE(refused.ok());
    EXPECT_EQ(refused.status().code(), StatusCode::kPermissionDenied);
    EXPECT_EQ(refused.status().message(),
              "job 'fix' would run as root (" + who.Describe() +
                  ") and queue 'adhoc' does not allow root tasks; submit with a token mapped to "
                  "another account, or "
                  "ask an admin to set allow_root: true on the queue (docs/queues.md)");
  }
  auto fix =
      state_->Submit(as("name: fix\nqueue: ops\ntasks: [{gpus: 1, command: [x]}]\n", root), 2, &fx);
  ASSERT_TRUE(fix.ok()) << fix.status().ToString();
  auto train = state_->Submit(
      as("name: t\nqueue: adhoc\ntasks: [{gpus: 1, command: [x]}]\n", alice), 2, &fx);
  ASSERT_TRUE(train.ok());
  auto open =
      state_->Submit(Spec("name: o\nqueue: adhoc\ntasks: [{gpus: 1, command: [x]}]\n"), 2, &fx);
  ASSERT_TRUE(open.ok());
  Effects launched;
  state_->Schedule(3, &launched);
  std::map<uint64_t, const pb::Launch*> by_job;
  for (const auto& m : launched.messages) {
    if (m.message.has_launch()) by_job[m.message.launch().job_id()] = &m.message.launch();
  }
  ASSERT_EQ(by_job.size(), 3u);
  const pb::Launch& l_fix = *by_job[*fix];
  ASSERT_TRUE(l_fix.has_run_as());
  EXPECT_TRUE(l_fix.run_as().has_uid());
  EXPECT_EQ(l_fix.run_as().uid(), 0u);
  EXPECT_TRUE(l_fix.run_as().allow_root());
  const pb::Launch& l_train = *by_job[*train];
  ASSERT_TRUE(l_train.has_run_as());
  EXPECT_EQ(l_train.run_as().uid(), 61001u);
  EXPECT_EQ(l_train.run_as().gid(), 61002u);
  EXPECT_EQ(
      std::vector<uint32_t>(l_train.run_as().groups().begin(), l_train.run_as().groups().end()),
      std::vector<uint32_t>{61010});
  EXPECT_FALSE(l_train.run_as().allow_root());
  // No account (`--auth none`): the agent's own user.
  EXPECT_FALSE(by_job[*open]->has_run_as());
  // Kept with the job across a restart: the stored spec says who.
  EXPECT_NE(state_->GetJob(*train)->spec.dump().find(
                R"("run_as":{"gid":61002,"groups":[61010],"uid":61001})"),
            std::string::npos)
      << state_->GetJob(*train)->spec.dump();
}

}  // namespace
}  // namespace hangar::controller
