#include "controller/state/cluster_state.h"

#include <gtest/gtest.h>

#include "cluster/cluster_yaml.h"
#include "controller/state/state_test_util.h"

namespace hangar::controller {
namespace {

std::shared_ptr<const cluster::Topology> TwoNodes() { return testing::TwoNodeTopology(); }

using testing::Spec;

constexpr const char* kGang = "name: gang\ntasks:\n  - {replicas: 2, gpus: 8, command: [train]}\n";

class ClusterStateTest : public ::testing::Test {
 protected:
  void SetUp() override { state_ = Make(); }
  std::unique_ptr<ClusterState> Make() {
    auto s = sched::Scheduler::Create({});
    ControllerOptions o;
    o.require_validation = false;  // validation has tests of its own (cluster_state_health_test)
    return std::make_unique<ClusterState>(TwoNodes(), o, std::move(s).value());
  }
  pb::Register Reg(const std::string& node, std::vector<std::string> running = {}) {
    pb::Register r;
    r.mutable_inventory()->set_node(node);
    r.mutable_inventory()->set_address("127.0.0." + std::string(node == "a" ? "1" : "2"));
    for (int i = 0; i < 8; ++i) r.mutable_inventory()->add_gpus()->set_index(i);
    for (const auto& id : running) r.add_running()->set_task_id(id);
    return r;
  }
  void RegisterAll(Time now) {
    Effects fx;
    ASSERT_TRUE(state_->OnRegister(Reg("a"), now, &fx).ok());
    ASSERT_TRUE(state_->OnRegister(Reg("b"), now, &fx).ok());
  }
  // Both nodes registered at 0, and job 1 (kGang) placed at 2 and running on a and b at 3.
  // A second state restored at `now` from the store of one that runs the gang on both nodes.
  std::unique_ptr<ClusterState> RestartedWithARunningGang(Time now) {
    auto store = NewMemoryStore();
    Effects fx;
    RunGang(&fx);
    if (!store->Commit(fx.batch).ok()) return nullptr;
    auto again = Make();
    if (!again->Restore(*store->Load(), now).ok()) return nullptr;
    return again;
  }
  void RunGang(Effects* fx) {
    RegisterAll(0);
    ASSERT_TRUE(state_->Submit(Spec(kGang), 1, fx).ok());
    state_->Schedule(2, fx);
    Status("a", "1.0.0", pb::TaskStatus::RUNNING, 0, 3, fx);
    Status("b", "1.0.1", pb::TaskStatus::RUNNING, 0, 3, fx);
  }
  void Status(const std::string& node, const std::string& task, pb::TaskStatus::State st, int code,
              Time now, Effects* fx) {
    pb::TaskStatus s;
    s.set_task_id(task);
    s.set_state(st);
    s.set_exit_code(code);
    EXPECT_TRUE(state_->OnTaskStatus(node, s, now, fx).ok());
  }
  // Priority preemption on the two 8-GPU nodes: job 1 (`first_gpus` GPUs) and job 2 (8) run, one
  // on each node; job 3 (2 x 8, priority 50) preempts both, which are pending again and stopping.
  void PreemptTwoVictims(int first_gpus, std::string* node1, std::string* node2) {
    sched::SchedulerConfig sc;
    sc.preemption.mode = sched::PreemptionMode::kPriority;
    ControllerOptions o;
    o.require_validation = false;
    state_ = std::make_unique<ClusterState>(TwoNodes(), o,
                                            std::move(sched::Scheduler::Create(sc)).value());
    RegisterAll(0);
    Effects fx;
    ASSERT_TRUE(state_
                    ->Submit(Spec("name: l1\ntasks: [{gpus: " + std::to_string(first_gpus) +
                                  ", command: [x]}]\n"),
                             1, &fx)
                    .ok());
    ASSERT_TRUE(state_->Submit(Spec("name: l2\ntasks: [{gpus: 8, command: [x]}]\n"), 1, &fx).ok());
    state_->Schedule(2, &fx);
    *node1 = state_->GetJob(1)->task_views[0].node;
    *node2 = state_->GetJob(2)->task_views[0].node;
    Status(*node1, "1.0.0", pb::TaskStatus::RUNNING, 0, 3, &fx);
    Status(*node2, "2.0.0", pb::TaskStatus::RUNNING, 0, 3, &fx);
    ASSERT_TRUE(
        state_
            ->Submit(Spec("name: h\npriority: 50\ntasks: [{replicas: 2, gpus: 8, command: [x]}]\n"),
                     4, &fx)
            .ok());
    Effects pre;
    state_->Schedule(5, &pre);
    ASSERT_EQ(state_->GetJob(1)->state, "preempting");
    ASSERT_EQ(state_->GetJob(2)->state, "preempting");
  }
  static std::vector<const pb::Launch*> Launches(const Effects& fx) {
    std::vector<const pb::Launch*> out;
    for (const auto& m : fx.messages)
      if (m.message.has_launch()) out.push_back(&m.message.launch());
    return out;
  }
  std::unique_ptr<ClusterState> state_;
};

TEST_F(ClusterStateTest, AStalledControllerLosesNobodyUntilHeartbeatsFlowAgain) {
  RegisterAll(0);
  // Neither node's heartbeat got in for 5 s: the controller, not both nodes, is in trouble.
  Effects fx;
  state_->CheckHeartbeats(5000, &fx);
  EXPECT_EQ(state_->GetNode("a")->state, "ready");
  EXPECT_EQ(state_->GetNode("b")->state, "ready");
  ASSERT_FALSE(fx.batch.events.empty());
  // Not "0 heartbeats in the last second where 0 nodes should send 0".
  EXPECT_EQ(fx.batch.events.back().message,
            "no node's heartbeat arrived in time (all 2 are overdue): the controller is not "
            "hearing the fleet, "
            "and may be the one in trouble; holding 2 node losses for up to 30s");
  // Heartbeats come back from a only: b really is gone.
  pb::Heartbeat hb;
  for (Time t = 5100; t <= 6000; t += 100) {
    hb.set_time_ms(t);
    state_->OnHeartbeat("a", hb, t);
  }
  Effects after;
  state_->CheckHeartbeats(6000, &after);
  EXPECT_EQ(state_->GetNode("a")->state, "ready");
  EXPECT_EQ(state_->GetNode("b")->state, "lost");
}

TEST_F(ClusterStateTest, AFleetThatStaysDarkIsLostAfterTheLongestHold) {
  RegisterAll(0);
  Effects fx;
  state_->CheckHeartbeats(5000, &fx);
  state_->CheckHeartbeats(34000, &fx);
  EXPECT_EQ(state_->GetNode("a")->state, "ready") << "held for 29 s";
  state_->CheckHeartbeats(35000, &fx);
  EXPECT_EQ(state_->GetNode("a")->state, "lost");
  EXPECT_EQ(state_->GetNode("b")->state, "lost");
}

TEST_F(ClusterStateTest, LateHeartbeatsStretchTheTimeoutBySoMuch) {
  RegisterAll(0);
  pb::Heartbeat hb;
  // a beats ten times a second; at first promptly, then every beat arrives 2 s after it was sent.
  for (Time t = 0; t < 4000; t += 100) {
    hb.set_time_ms(t < 1000 ? t : t - 2000);
    state_->OnHeartbeat("a", hb, t);
  }
  Effects fx;
  state_->CheckHeartbeats(3900, &fx);  // b silent for 3.9 s, past the 3 s timeout
  EXPECT_EQ(state_->GetNode("b")->state, "ready") << "heartbeats arrive 2 s late: b gets 2 s more";
  for (Time t = 4000; t <= 9000; t += 100) {
    hb.set_time_ms(t - 2000);
    state_->OnHeartbeat("a", hb, t);
    if (t == 5400) {
      state_->CheckHeartbeats(t, &fx);
      EXPECT_EQ(state_->GetNode("b")->state, "ready");
    }
  }
  state_->CheckHeartbeats(9000, &fx);
  EXPECT_EQ(state_->GetNode("b")->state, "lost");
  bool said = false;
  for (const auto& e : fx.batch.events)
    said |= e.message.find("lost: no heartbeat for 9s (heartbeats arrive up to") == 0;
  EXPECT_TRUE(said) << "the event says how late heartbeats were";
}

TEST_F(ClusterStateTest, SubmitValidatesAndPersists) {
  Effects fx;
  auto id = state_->Submit(Spec("name: a\ntasks: [{gpus: 1, command: [x]}]\n"), 10, &fx);
  ASSERT_TRUE(id.ok());
  ASSERT_EQ(fx.batch.jobs.size(), 1u);
  EXPECT_EQ(fx.batch.jobs[0].state, "pending");
  EXPECT_EQ(fx.batch.values[0].key, "next_job_id");
  Effects bad;
  auto q = state_->Submit(Spec("name: a\nqueue: gold\ntasks: [{gpus: 1}]\n"), 10, &bad);
  EXPECT_EQ(q.status().message(), "queue 'gold' does not exist; the queues are: default");
  auto never = state_->Submit(Spec("name: a\ntasks: [{gpus: 9}]\n"), 10, &bad);
  EXPECT_EQ(never.status().code(), StatusCode::kOutOfRange);
  EXPECT_NE(never.status().message().find("asks 9 GPUs per replica, largest node has 8"),
            std::string::npos);
  EXPECT_TRUE(bad.batch.empty());
}

// cluster.yaml's gpu_models at submission (job/gpu_proportions.h has the rules' own tests).
TEST_F(ClusterStateTest, SubmitAppliesTheGpuModelsCpuAndMemoryPerGpu) {
  ControllerOptions o;
  o.require_validation = false;
  cluster::GpuModelLimits h100;
  h100.model = "H100";
  h100.default_milli_cpu_per_gpu = 8000;  // the derived default of 64 cores / 8 GPUs
  h100.default_memory_mib_per_gpu = 64 * 1024;
  h100.max_milli_cpu_per_gpu = 8000;
  o.gpu_models = {h100};
  state_ = std::make_unique<ClusterState>(TwoNodes(), o,
                                          std::move(sched::Scheduler::Create({})).value());
  Effects fx;
  auto id = state_->Submit(Spec("name: a\ntasks: [{gpus: 2, command: [x]}]\n"), 10, &fx);
  ASSERT_TRUE(id.ok()) << id.status().ToString();
  auto view = state_->GetJob(*id);
  ASSERT_TRUE(view.ok());
  EXPECT_EQ(view->spec["tasks"][0]["cpu_per_gpu"], "8000m") << view->spec.dump();
  EXPECT_EQ(view->spec["tasks"][0]["memory_per_gpu"], "65536Mi") << view->spec.dump();
  Effects bad;
  auto over = state_->Submit(Spec("name: b\ntasks: [{gpus: 1, cpu_per_gpu: 12, command: [x]}]\n"),
                             10, &bad);
  ASSERT_FALSE(over.ok());
  EXPECT_EQ(over.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(
      over.status().message().find("12 cores of CPU per GPU, above the most a H100 GPU may have"),
      std::string::npos)
      << over.status().message();
  EXPECT_TRUE(bad.batch.empty());
}

TEST_F(ClusterStateTest, NothingIsPlacedOnNodesThatHaveNotRegistered) {
  Effects fx;
  ASSERT_TRUE(state_->Submit(Spec(kGang), 1, &fx).ok());
  Effects cycle;
  state_->Schedule(2, &cycle);
  EXPECT_TRUE(Launches(cycle).empty());
  EXPECT_EQ(state_->GetJob(1)->state, "pending");
}

TEST_F(ClusterStateTest, GangRunsAndSucceeds) {
  RegisterAll(0);
  Effects fx;
  ASSERT_TRUE(state_->Submit(Spec(kGang), 1, &fx).ok());
  Effects cycle;
  state_->Schedule(2, &cycle);
  auto launches = Launches(cycle);
  ASSERT_EQ(launches.size(), 2u);
  EXPECT_EQ(launches[0]->task_id(), "1.0.0");
  EXPECT_EQ(launches[0]->env().at("MASTER_ADDR"), launches[1]->env().at("MASTER_ADDR"));
  EXPECT_EQ(launches[1]->env().at("RANK"), "1");
  EXPECT_EQ(launches[0]->gpu_indices_size(), 8);
  ASSERT_EQ(cycle.batch.jobs.size(), 1u);
  EXPECT_EQ(cycle.batch.jobs[0].state, "starting");
  Effects st;
  Status("a", "1.0.0", pb::TaskStatus::RUNNING, 0, 3, &st);
  EXPECT_EQ(state_->GetJob(1)->state, "starting");
  Status("b", "1.0.1", pb::TaskStatus::RUNNING, 0, 3, &st);
  EXPECT_EQ(state_->GetJob(1)->state, "running");
  Status("a", "1.0.0", pb::TaskStatus::EXITED, 0, 9, &st);
  Status("b", "1.0.1", pb::TaskStatus::EXITED, 0, 9, &st);
  auto j = state_->GetJob(1);
  EXPECT_EQ(j->state, "succeeded");
  EXPECT_EQ(j->ended, 9);
  EXPECT_EQ(state_->ListNodes()[0].gpus_free, 8);
}

// A job of `/bin/true` can end before its RUNNING reaches the controller (the agent's reaper
// reports the exit first): it still ran, and its record says when it started.
TEST_F(ClusterStateTest, AJobHeardOfFirstByItsExitStillHasAStartTime) {
  RegisterAll(0);
  Effects fx;
  ASSERT_TRUE(
      state_->Submit(Spec("name: t\ntasks:\n  - gpus: 1\n    command: [/bin/true]\n"), 1, &fx)
          .ok());
  Effects cycle;
  state_->Schedule(2, &cycle);
  ASSERT_EQ(Launches(cycle).size(), 1u);
  const std::string node = state_->GetJob(1)->task_views[0].node;
  Effects st;
  Status(node, "1.0.0", pb::TaskStatus::EXITED, 0, 7, &st);
  Status(node, "1.0.0", pb::TaskStatus::RUNNING, 0, 8, &st);  // late: old news
  auto j = state_->GetJob(1);
  EXPECT_EQ(j->state, "succeeded");
  EXPECT_EQ(j->started, 7);
  EXPECT_EQ(j->ended, 7);
}

// Issue 16: a node reports only on the tasks placed on it. A forged "exited 0" from another node
// (or from no node at all) would free GPUs whose processes still run, and the next job would be
// placed on them.
TEST_F(ClusterStateTest, ANodeCannotEndAnotherNodesTask) {
  Effects fx;
  RunGang(&fx);
  ASSERT_EQ(state_->GetJob(1)->state, "running");
  pb::TaskStatus forged;
  forged.set_task_id("1.0.1");  // placed on b
  forged.set_state(pb::TaskStatus::EXITED);
  Effects st;
  ::hangar::Status refused = state_->OnTaskStatus("a", forged, 4, &st);
  EXPECT_EQ(refused.code(), StatusCode::kPermissionDenied);
  EXPECT_EQ(refused.message(), "node a reported task 1.0.1, which was placed on b");
  EXPECT_EQ(state_->OnTaskStatus("", forged, 4, &st).code(), StatusCode::kPermissionDenied);
  EXPECT_EQ(state_->OnTaskStatus("nowhere", forged, 4, &st).code(), StatusCode::kPermissionDenied);
  EXPECT_TRUE(st.batch.empty());
  EXPECT_EQ(state_->GetJob(1)->state, "running");
  EXPECT_EQ(state_->GetNode("b")->gpus_free, 0) << "b's GPUs still run the task";
  // Nor can it vouch for b's checkpoint.
  pb::CheckpointDone c;
  c.set_task_id("1.0.1");
  EXPECT_EQ(state_->OnCheckpointDone("a", c, 5, &st).code(), StatusCode::kPermissionDenied);
  EXPECT_TRUE(st.batch.empty());
  // b itself may.
  EXPECT_TRUE(state_->OnCheckpointDone("b", c, 5, &st).ok());
  ASSERT_EQ(st.batch.events.size(), 1u);
  EXPECT_EQ(st.batch.events[0].message, "checkpoint written by task 1 on b");
  EXPECT_TRUE(state_->OnTaskStatus("b", forged, 6, &st).ok());
  EXPECT_EQ(state_->GetNode("b")->gpus_free, 8);
}

// Issue 15: time_limit is enforced. At the limit the tasks get the checkpoint signal and the
// grace, then SIGTERM and SIGKILL; the job ends timed_out and its GPUs are held until its tasks
// have ended.
TEST_F(ClusterStateTest, ATimeLimitStopsTheJobWithTheCheckpointProtocol) {
  RegisterAll(0);
  Effects fx;
  ASSERT_TRUE(
      state_
          ->Submit(Spec("name: t\ntime_limit: 5s\ncheckpoint: {signal: SIGUSR1, grace: 2s}\n"
                        "tasks: [{gpus: 8, command: [sleep, '60']}]\n"),
                   0, &fx)
          .ok());
  state_->Schedule(1, &fx);
  Status("a", "1.0.0", pb::TaskStatus::RUNNING, 0, 1000, &fx);
  ASSERT_EQ(state_->GetJob(1)->state, "running");
  Effects early;
  state_->EnforceTimeLimits(5999, &early);
  EXPECT_EQ(state_->GetJob(1)->state, "running");
  EXPECT_TRUE(early.messages.empty());
  Effects at;
  state_->EnforceTimeLimits(6000, &at);
  auto j = state_->GetJob(1);
  EXPECT_EQ(j->state, "timed_out");
  EXPECT_EQ(j->ended, 6000);
  EXPECT_EQ(
      j->message,
      "time limit 5s reached: sent SIGUSR1, then SIGTERM after at most 2s and SIGKILL 10s later");
  ASSERT_EQ(at.messages.size(), 1u);
  const pb::Stop& stop = at.messages[0].message.stop();
  EXPECT_EQ(stop.task_id(), "1.0.0");
  EXPECT_EQ(stop.checkpoint_signal(), 10);
  EXPECT_EQ(stop.grace_ms(), 2000);
  EXPECT_EQ(stop.kill_grace_ms(), 10000);
  EXPECT_EQ(state_->GetNode("a")->gpus_free, 0) << "held until the task has ended";
  Effects again;
  state_->EnforceTimeLimits(7000, &again);
  EXPECT_TRUE(again.messages.empty()) << "stopped once";
  Status("a", "1.0.0", pb::TaskStatus::EXITED, 0, 7500, &again);
  EXPECT_EQ(state_->GetJob(1)->state, "timed_out")
      << "an exit 0 after the signal does not make it succeeded";
  EXPECT_EQ(state_->GetNode("a")->gpus_free, 8);
}

// A victim that stops before the others must not be placed back on the GPUs its preemptor waits
// for: that preempted it again, in a loop (seen on `hangar dev` with pretrain-4x8 and the other
// examples: 38 preemptions for one start).
TEST_F(ClusterStateTest, AVictimThatStopsFirstDoesNotTakeBackWhatItsPreemptorWaitsFor) {
  std::string node1, node2;
  ASSERT_NO_FATAL_FAILURE(PreemptTwoVictims(8, &node1, &node2));
  // Job 1's task stops first; job 2's is still checkpointing.
  Effects st;
  Status(node1, "1.0.0", pb::TaskStatus::EXITED, 0, 6, &st);
  Effects cycle;
  state_->Schedule(7, &cycle);
  EXPECT_EQ(state_->GetJob(1)->state, "pending")
      << "job 1 must not take back node a while job 3 waits for job 2";
  EXPECT_EQ(state_->GetJob(3)->state, "pending");
  // Job 2 stops: job 3 starts on both nodes, and nobody was preempted twice.
  Status(node2, "2.0.0", pb::TaskStatus::EXITED, 0, 8, &st);
  Effects start;
  state_->Schedule(9, &start);
  EXPECT_EQ(state_->GetJob(3)->state, "starting") << state_->GetJob(3)->reason;
  EXPECT_EQ(state_->GetJob(1)->restarts, 1u);
  EXPECT_EQ(state_->GetJob(2)->restarts, 1u);
}

// A victim still checkpointing holds its GPUs: the dashboard's map (GpuGrants) drew them free,
// since the requeued job is no longer active, while the scheduler and the node list held them.
TEST_F(ClusterStateTest, TheGpusOfTasksStillStoppingAreShownHeld) {
  std::string node1, node2;
  ASSERT_NO_FATAL_FAILURE(PreemptTwoVictims(8, &node1, &node2));
  ASSERT_EQ(state_->GetJob(1)->state, "preempting");
  auto held_by = [&](sched::JobId job) {
    size_t n = 0;
    for (const auto& [id, g] : state_->GpuGrants()) n += id == job && g.milli >= 1000;
    return n;
  };
  EXPECT_EQ(held_by(1), 8u) << "job 1's task still stops on " << node1;
  EXPECT_EQ(held_by(2), 8u);
  EXPECT_EQ(state_->GetNode(node1)->gpus_free, 0);
  Effects st;
  Status(node1, "1.0.0", pb::TaskStatus::EXITED, 0, 6, &st);
  EXPECT_EQ(held_by(1), 0u) << "released once it has ended";
  EXPECT_EQ(state_->GetJob(1)->state, "pending")
      << "its last task has stopped: it may be placed again";
  EXPECT_EQ(state_->GetJob(2)->state, "preempting") << "job 2's task still stops on " << node2;
  EXPECT_EQ(held_by(2), 8u);
}

// The GPUs of a preemptor's placement that are free while a victim still stops on the same node
// are held too: they were not (only whole tasks were held), a small job took them, the preemptor
// found its plan taken and preempted again, in a loop (`hangar dev --submit-examples
// examples/jobs`: thousands of attempts a minute, found by the first-run journey).
TEST_F(ClusterStateTest, APreemptorHoldsTheFreeGpusOfANodeAVictimStillHolds) {
  std::string node1, node2;
  ASSERT_NO_FATAL_FAILURE(PreemptTwoVictims(4, &node1, &node2));
  Effects fx;
  // While both victims checkpoint, a small job arrives: the 4 free GPUs beside job 1's are job 3's.
  ASSERT_TRUE(state_->Submit(Spec("name: small\ntasks: [{gpus: 1, command: [x]}]\n"), 6, &fx).ok());
  Effects cycle;
  state_->Schedule(7, &cycle);
  EXPECT_EQ(state_->GetJob(4)->state, "pending") << "job 4 must not take GPUs job 3 waits for";
  Effects st;
  Status(node1, "1.0.0", pb::TaskStatus::EXITED, 0, 8, &st);
  Status(node2, "2.0.0", pb::TaskStatus::EXITED, 0, 8, &st);
  Effects start;
  state_->Schedule(9, &start);
  EXPECT_EQ(state_->GetJob(3)->state, "starting") << state_->GetJob(3)->reason;
  EXPECT_EQ(state_->GetJob(1)->restarts, 1u);
  EXPECT_EQ(state_->GetJob(2)->restarts, 1u);
}

// Ctrl-C on `hangar dev` stops the agents and their tasks with them (--stop-tasks-on-exit): the
// jobs did not fail, they run again after the restart (they came back `failed: killed by signal
// 15`, found by the first-run journey).
TEST_F(ClusterStateTest, ATaskStoppedBecauseItsAgentExitedRequeuesItsJob) {
  Effects fx;
  RunGang(&fx);
  ASSERT_EQ(state_->GetJob(1)->state, "running");
  pb::TaskStatus s;
  s.set_task_id("1.0.0");
  s.set_state(pb::TaskStatus::EXITED);
  s.set_signal(15);
  s.set_agent_exiting(true);
  s.set_message("stopped when its agent exited (--stop-tasks-on-exit)");
  Effects st;
  ASSERT_TRUE(state_->OnTaskStatus("a", s, 5, &st).ok());
  auto j = state_->GetJob(1);
  EXPECT_EQ(j->state, "preempting");
  EXPECT_EQ(j->restarts, 1u);
  EXPECT_EQ(state_->GetNode("a")->gpus_free, 8) << "its task has ended: what it held is free again";
  EXPECT_EQ(state_->GetNode("b")->gpus_free, 0) << "held until b's task has stopped";
  ASSERT_EQ(st.messages.size(), 1u) << "the other task of the gang is stopped";
  EXPECT_EQ(st.messages[0].node, "b");
  bool said = false;
  for (const auto& e : st.batch.events)
    said |= e.message == "requeued whole: task 0 was stopped when node a's agent exited";
  EXPECT_TRUE(said);
}

TEST_F(ClusterStateTest, AFailedTaskCarriesTheAgentsWordsIntoTheJobsMessage) {
  RegisterAll(0);
  Effects fx;
  ASSERT_TRUE(state_->Submit(Spec(kGang), 1, &fx).ok());
  state_->Schedule(2, &fx);
  Effects st;
  pb::TaskStatus s;
  s.set_task_id("1.0.0");
  s.set_state(pb::TaskStatus::EXITED);
  s.set_signal(9);
  s.set_message("GPU memory over its MPS limit: it used 61440 MiB of GPU 0");
  ASSERT_TRUE(state_->OnTaskStatus("a", s, 5, &st).ok());
  EXPECT_EQ(
      state_->GetJob(1)->message,
      "task 0 was killed by signal 9: GPU memory over its MPS limit: it used 61440 MiB of GPU 0");
}

TEST_F(ClusterStateTest, AFailedTaskFailsTheJobAndStopsTheRest) {
  RegisterAll(0);
  Effects fx;
  ASSERT_TRUE(state_->Submit(Spec(kGang), 1, &fx).ok());
  state_->Schedule(2, &fx);
  Effects st;
  Status("a", "1.0.0", pb::TaskStatus::EXITED, 3, 5, &st);
  auto j = state_->GetJob(1);
  EXPECT_EQ(j->state, "failed");
  EXPECT_EQ(j->message, "task 0 exited with code 3");
  bool stopped_other = false;
  for (const auto& m : st.messages)
    stopped_other |= m.node == "b" && m.message.has_stop() && m.message.stop().task_id() == "1.0.1";
  EXPECT_TRUE(stopped_other);
  // Node b's GPUs stay allocated until its task has ended.
  EXPECT_EQ(state_->GetNode("b")->gpus_free, 0);
  Status("b", "1.0.1", pb::TaskStatus::EXITED, 0, 6, &st);
  EXPECT_EQ(state_->GetNode("b")->gpus_free, 8);
}

TEST_F(ClusterStateTest, CancelStopsEveryTask) {
  RegisterAll(0);
  Effects fx;
  ASSERT_TRUE(state_->Submit(Spec(kGang), 1, &fx).ok());
  state_->Schedule(2, &fx);
  Effects c;
  ASSERT_TRUE(state_->Cancel(1, 3, &c).ok());
  int stops = 0;
  for (const auto& m : c.messages) stops += m.message.has_stop();
  EXPECT_EQ(stops, 2);
  EXPECT_EQ(state_->GetJob(1)->state, "cancelled");
  EXPECT_EQ(state_->Cancel(1, 4, &c).code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(state_->Cancel(99, 4, &c).code(), StatusCode::kNotFound);
}

TEST_F(ClusterStateTest, LostNodeRequeuesTheGangWhole) {
  RegisterAll(0);
  Effects fx;
  ASSERT_TRUE(state_->Submit(Spec(kGang), 1, &fx).ok());
  state_->Schedule(2, &fx);
  Effects st;
  Status("a", "1.0.0", pb::TaskStatus::RUNNING, 0, 3, &st);
  Status("b", "1.0.1", pb::TaskStatus::RUNNING, 0, 3, &st);
  pb::Heartbeat hb;
  state_->OnHeartbeat("a", hb, 3000);  // a is alive, b went silent at 0
  Effects lost;
  state_->CheckHeartbeats(3500, &lost);
  auto j = state_->GetJob(1);
  EXPECT_EQ(j->state, "preempting");
  EXPECT_EQ(j->attempt, 1u);
  EXPECT_EQ(j->restarts, 1u);
  EXPECT_NE(j->message.find("node b lost"), std::string::npos);
  EXPECT_EQ(state_->GetNode("b")->state, "lost");
  // Issue 15: the requeued job's logs are still there, where attempt 0 ran.
  EXPECT_EQ(*state_->LocateTask(1, 0), std::make_pair(std::string("a"), std::string("1.0.0")));
  EXPECT_EQ(*state_->LocateTask(1, 1, 0u), std::make_pair(std::string("b"), std::string("1.0.1")));
  EXPECT_EQ(state_->LocateTask(1, 0, 5u).status().code(), StatusCode::kNotFound);
  // Issue 15: b's agent was only stopped (SIGSTOP) and beats again on the same stream; the
  // heartbeat says "register again" (the channel then closes the stream) instead of being taken
  // as if nothing had happened, and b stays lost until it has.
  EXPECT_FALSE(state_->OnHeartbeat("b", hb, 3550));
  EXPECT_EQ(state_->GetNode("b")->state, "lost");
  EXPECT_TRUE(state_->OnHeartbeat("a", hb, 3550));
  EXPECT_FALSE(state_->OnHeartbeat("nowhere", hb, 3550));
  bool stop_a = false;
  for (const auto& m : lost.messages) stop_a |= m.node == "a" && m.message.has_stop();
  EXPECT_TRUE(stop_a);
  // The old task on a keeps its GPUs until it has ended; then b comes back and the gang runs.
  EXPECT_EQ(state_->GetNode("a")->gpus_free, 0);
  Status("a", "1.0.0", pb::TaskStatus::EXITED, 0, 3600, &lost);
  EXPECT_EQ(state_->GetNode("a")->gpus_free, 8);
  ASSERT_TRUE(state_->OnRegister(Reg("b", {"1.0.1"}), 3700, &lost).ok());
  EXPECT_EQ(state_->GetNode("b")->state, "recovering");  // its old task must stop first
  Status("b", "1.0.1", pb::TaskStatus::EXITED, 0, 3800, &lost);
  EXPECT_EQ(state_->GetNode("b")->state, "ready");
  Effects cycle;
  state_->Schedule(3900, &cycle);
  auto launches = Launches(cycle);
  ASSERT_EQ(launches.size(), 2u);
  EXPECT_EQ(launches[0]->task_id(), "1.1.0");
  EXPECT_EQ(launches[0]->env().at("HANGAR_RESTART_COUNT"), "1");
}

TEST_F(ClusterStateTest, RestoreRebuildsStateAndReconcilesWithAgents) {
  auto store = NewMemoryStore();
  RegisterAll(0);
  Effects fx;
  ASSERT_TRUE(state_->Submit(Spec(kGang), 1, &fx).ok());
  ASSERT_TRUE(state_->Submit(Spec("name: waits\ntasks: [{gpus: 8, command: [x]}]\n"), 1, &fx).ok());
  state_->Schedule(2, &fx);
  Status("a", "1.0.0", pb::TaskStatus::RUNNING, 0, 3, &fx);
  ASSERT_TRUE(store->Commit(fx.batch).ok());
  // A new controller from the store alone.
  auto again = Make();
  ASSERT_TRUE(again->Restore(*store->Load(), 100).ok());
  EXPECT_EQ(again->GetJob(1)->state, "starting");
  EXPECT_EQ(again->GetJob(2)->state, "pending");
  EXPECT_EQ(again->GetNode("a")->gpus_free, 0);
  // Node a still runs its task: confirmed, not launched again. Node b never got its launch.
  Effects rec;
  ASSERT_TRUE(again->OnRegister(Reg("a", {"1.0.0"}), 101, &rec).ok());
  EXPECT_TRUE(Launches(rec).empty());
  Effects rec_b;
  ASSERT_TRUE(again->OnRegister(Reg("b"), 101, &rec_b).ok());
  auto launches = Launches(rec_b);
  ASSERT_EQ(launches.size(), 1u);
  EXPECT_EQ(launches[0]->task_id(), "1.0.1");
  Effects more;
  again->Schedule(102, &more);
  EXPECT_TRUE(Launches(more).empty());  // job 2 still has no room: nothing runs twice
  Effects next;
  ASSERT_TRUE(again->Submit(Spec("name: x\ntasks: [{gpus: 1, command: [x]}]\n"), 103, &next).ok());
  EXPECT_EQ(again->next_job_id(), 4u);
}

// After a restart the whole fleet reconnects at once; a node that has not come back within the
// heartbeat timeout is not lost (its gang not requeued) until the reconnect grace has passed.
TEST_F(ClusterStateTest, ARestartGivesNodesTheReconnectGraceBeforeTheirWorkIsRequeued) {
  auto again = RestartedWithARunningGang(1000);
  ASSERT_TRUE(again);
  EXPECT_EQ(again->ReconnectGrace(), 10 * kSecond + 5);  // 10 s + 2.5 ms for each of 2 nodes
  Effects rec;
  ASSERT_TRUE(again->OnRegister(Reg("a", {"1.0.0"}), 1100, &rec).ok());
  pb::Heartbeat hb;
  auto beat_a_until = [&](Time until, Time from) {
    for (Time t = from; t <= until; t += 100) {
      hb.set_time_ms(t);
      again->OnHeartbeat("a", hb, t);
      if (t % 1000 == 0) {
        Effects check;
        again->CheckHeartbeats(t, &check);
      }
    }
  };
  beat_a_until(9000, 1200);  // 8 s after the restart: well past the 3 s timeout, within the grace
  EXPECT_NE(again->GetNode("b")->state, "lost");
  EXPECT_EQ(again->GetJob(1)->state, "running");
  beat_a_until(12000, 9100);  // past the grace: b never came back
  EXPECT_EQ(again->GetNode("b")->state, "lost");
  EXPECT_NE(again->GetJob(1)->state, "running");
}

// A large store takes long to restore (a cold takeover of 100,000 jobs took 15 s): the grace counts
// from when the controller can hear its agents again, not from when the restore began. Before,
// every node was lost the moment the restore ended and its running gangs started a second time.
TEST_F(ClusterStateTest, TheReconnectGraceCountsFromWhenTheControllerListensAgain) {
  auto again = RestartedWithARunningGang(1000);
  ASSERT_TRUE(again);
  again->OpenReconnectGrace(16000);  // the restore took 15 s
  Effects check;
  again->CheckHeartbeats(16100, &check);
  EXPECT_NE(again->GetNode("a")->state, "lost");
  EXPECT_NE(again->GetNode("b")->state, "lost");
  EXPECT_EQ(again->GetJob(1)->state, "running");
  Effects late;
  again->CheckHeartbeats(16000 + again->ReconnectGrace() + 3100, &late);
  EXPECT_EQ(again->GetNode("b")->state, "lost")
      << "past the grace, a node that never came back is lost";
}

TEST_F(ClusterStateTest, DrainKeepsNewWorkAway) {
  RegisterAll(0);
  Effects fx;
  ASSERT_TRUE(state_->Drain("a", "bad fan", 1, &fx).ok());
  EXPECT_EQ(state_->GetNode("a")->state, "drained");
  EXPECT_EQ(state_->Drain("zz", "x", 1, &fx).code(), StatusCode::kNotFound);
  EXPECT_EQ(state_->Drain("a", "", 1, &fx).code(), StatusCode::kInvalidArgument);
  ASSERT_TRUE(state_->Submit(Spec(kGang), 1, &fx).ok());
  Effects cycle;
  state_->Schedule(2, &cycle);
  EXPECT_TRUE(Launches(cycle).empty());
  ASSERT_TRUE(state_->Undrain("a", 3, &fx).ok());
  state_->Schedule(4, &cycle);
  EXPECT_EQ(Launches(cycle).size(), 2u);
}

TEST_F(ClusterStateTest, UnknownNodeOrWrongGpuCountIsRefused) {
  Effects fx;
  pb::Register r = Reg("zz");
  EXPECT_EQ(state_->OnRegister(r, 0, &fx).code(), StatusCode::kNotFound);
  pb::Register few;
  few.mutable_inventory()->set_node("a");
  few.mutable_inventory()->add_gpus();
  EXPECT_NE(
      state_->OnRegister(few, 0, &fx).message().find("reports 1 GPUs but cluster.yaml declares 8"),
      std::string::npos);
}

}  // namespace
}  // namespace hangar::controller
