// The controller's side of progress reports: who may report, hang detection acting through the
// job's on_hang (restart, fail, notify), and stragglers named with their node.
#include <gtest/gtest.h>

#include "cluster/cluster_yaml.h"
#include "controller/state/cluster_state.h"
#include "controller/state/state_test_util.h"

namespace hangar::controller {
namespace {

class ProgressStateTest : public ::testing::Test {
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
      r.mutable_inventory()->set_address(std::string("127.0.0.") + (n[0] == 'a' ? "1" : "2"));
      for (int i = 0; i < 8; ++i) r.mutable_inventory()->add_gpus()->set_index(i);
      ASSERT_TRUE(state_->OnRegister(r, 0, &fx).ok());
    }
  }
  // Job 1: a gang of two 8-GPU tasks with `progress`, running on a and b since 1000.
  void RunGang(const std::string& progress) {
    auto spec = job::ParseJobSpec("name: train\nprogress: " + progress +
                                      "\ncheckpoint: {signal: SIGUSR1, grace: 3s}\n"
                                      "tasks:\n  - {replicas: 2, gpus: 8, command: [train]}\n",
                                  "job.yaml");
    ASSERT_TRUE(spec.ok()) << spec.status().message();
    Effects fx;
    ASSERT_TRUE(state_->Submit(*spec, 0, &fx).ok());
    state_->Schedule(1, &fx);
    for (auto [node, task] : {std::pair{"a", "1.0.0"}, std::pair{"b", "1.0.1"}}) {
      pb::TaskStatus s;
      s.set_task_id(task);
      s.set_state(pb::TaskStatus::RUNNING);
      ASSERT_TRUE(state_->OnTaskStatus(node, s, 1000, &fx).ok());
    }
    ASSERT_EQ(state_->GetJob(1)->state, "running");
  }
  // A heartbeat from `node` whose 8 GPUs run at `clock` MHz (60 C, PCIe gen5 x16).
  void Beat(const std::string& node, uint32_t clock, Time now, Effects* fx) {
    pb::Heartbeat hb;
    for (uint32_t i = 0; i < 8; ++i) {
      pb::GpuTelemetry* t = hb.add_gpus();
      t->set_index(i);
      t->set_sm_clock_mhz(clock);
      t->set_temperature_c(60);
      t->set_pcie_gen(5);
      t->set_pcie_width(16);
    }
    ASSERT_TRUE(state_->OnHeartbeat(node, hb, now, fx));
  }
  // Three reports of each rank, a second apart from 2000: rank 0 on a takes 0.1 s a step, rank 1
  // on b `slow_us`.
  void ReportSteps(uint64_t slow_us, Effects* fx) {
    for (Time t = 2000; t < 5000; t += 1000) {
      ASSERT_TRUE(Report("a", "1.0.0", static_cast<uint64_t>(t), 100'000, t, fx).ok());
      ASSERT_TRUE(Report("b", "1.0.1", static_cast<uint64_t>(t), slow_us, t, fx).ok());
    }
  }
  ::hangar::Status Report(const std::string& node, const std::string& task, uint64_t step,
                          uint64_t step_us, Time now, Effects* fx) {
    pb::Progress p;
    p.set_task_id(task);
    p.set_step(step);
    p.set_step_time_us(step_us);
    return state_->OnProgress(node, p, now, fx);
  }
  static bool HasEvent(const Effects& fx, const std::string& subject, const std::string& text) {
    for (const auto& e : fx.batch.events) {
      if (e.subject == subject && e.message.find(text) != std::string::npos) return true;
    }
    return false;
  }
  std::unique_ptr<ClusterState> state_;
};

TEST_F(ProgressStateTest, AHungGangIsRestartedWithTheCheckpointSignalAndSaysWhy) {
  RunGang("{hang_timeout: 10s, on_hang: restart}");
  Effects fx;
  ASSERT_TRUE(Report("a", "1.0.0", 40, 0, 2000, &fx).ok());
  ASSERT_TRUE(Report("b", "1.0.1", 40, 0, 2000, &fx).ok());
  ASSERT_TRUE(Report("a", "1.0.0", 41, 0, 5000, &fx).ok());  // b stops at step 40
  state_->Tick(11'000, &fx);
  EXPECT_EQ(state_->GetJob(1)->state, "running");
  Effects hang;
  state_->Tick(12'000, &hang);
  auto j = state_->GetJob(1);
  EXPECT_EQ(j->state, "preempting");
  EXPECT_EQ(j->restarts, 1u);
  const std::string why =
      "hung: rank 1 on b (step 40) reported no progress for 10s (hang_timeout 10s; the furthest "
      "rank is at step 41)";
  EXPECT_EQ(j->message, why + "; restarted (the checkpoint signal first)");
  EXPECT_TRUE(HasEvent(hang, "job/1", why + "; on_hang: restart"));
  ASSERT_EQ(hang.messages.size(), 2u);
  for (const auto& m : hang.messages) {
    EXPECT_EQ(m.message.stop().checkpoint_signal(), 10);
    EXPECT_EQ(m.message.stop().grace_ms(), 3000);
  }
  EXPECT_EQ(j->progress["last_hang"], why);
  EXPECT_EQ(j->progress["ranks"][1]["step"], 40);
  EXPECT_EQ(j->progress["ranks"][1]["node"], "b");
}

TEST_F(ProgressStateTest, NotifyOnlyRecordsAndFailEndsTheJob) {
  RunGang("{hang_timeout: 10s, on_hang: notify}");
  Effects fx;
  state_->Tick(11'000, &fx);
  EXPECT_EQ(state_->GetJob(1)->state, "running");
  EXPECT_TRUE(HasEvent(fx, "job/1",
                       "hung: no rank reported progress in the 10s since the attempt started"));
  EXPECT_TRUE(HasEvent(fx, "job/1", "on_hang: notify, so it runs on"));
  EXPECT_TRUE(fx.messages.empty());

  SetUp();
  RunGang("{hang_timeout: 10s, on_hang: fail}");
  Effects fail;
  ASSERT_TRUE(Report("a", "1.0.0", 7, 0, 3000, &fail).ok());
  state_->Tick(13'000, &fail);
  auto j = state_->GetJob(1);
  EXPECT_EQ(j->state, "failed");
  EXPECT_EQ(j->message.rfind("hung: rank 0 on a (step 7)", 0), 0u) << j->message;
  EXPECT_EQ(fail.messages.size(), 2u) << "both tasks are stopped";
  // A finished job's reports stay an hour (for `hangar job` and `explain`), then go.
  state_->Tick(13'000 + 30 * kMinute, &fail);
  EXPECT_EQ(state_->GetJob(1)->progress["ranks"][0]["step"], 7);
  state_->Tick(13'000 + 61 * kMinute, &fail);
  EXPECT_TRUE(state_->GetJob(1)->progress.is_null());
}

TEST_F(ProgressStateTest, OnlyTheNodeThatRunsATaskMayReportItsProgress) {
  RunGang("{hang_timeout: 10s}");
  Effects fx;
  EXPECT_EQ(Report("b", "1.0.0", 99, 0, 2000, &fx).code(), StatusCode::kPermissionDenied);
  EXPECT_TRUE(state_->GetJob(1)->progress.is_null());
  EXPECT_TRUE(Report("a", "1.0.0", 5, 0, 2000, &fx).ok());
  EXPECT_EQ(state_->GetJob(1)->progress["ranks"][0]["step"], 5);
}

// The straggler's event joins its GPUs' telemetry to the step times: here its node's GPUs run at
// 70% of the clock of the gang's others (a slow GPU, as the fake backend's `kind: slow` shows it).
// With telemetry that sets nothing apart, the event says to look outside the GPU.
TEST_F(ProgressStateTest, AStragglersEventSaysWhatItsGpusTelemetryShows) {
  RunGang("{straggler_factor: 1.5, straggler_reports: 2}");
  Effects fx;
  Beat("a", 1980, 1500, &fx);
  Beat("b", 1386, 1500, &fx);
  ReportSteps(160'000, &fx);
  EXPECT_TRUE(HasEvent(fx, "job/1",
                       "reports in a row); telemetry: GPU 0 of b runs at 1386 MHz against 1980 "
                       "MHz on the gang's others; GPU 1 of b runs at 1386 MHz"));
  EXPECT_TRUE(HasEvent(fx, "node/b", "telemetry: GPU 0 of b runs at 1386 MHz"));
}

TEST_F(ProgressStateTest, AStragglerWithOrdinaryTelemetryIsToldToLookOutsideTheGpu) {
  RunGang("{straggler_factor: 1.5, straggler_reports: 2}");
  Effects fx;
  for (const char* node : {"a", "b"}) Beat(node, 1980, 1500, &fx);
  ReportSteps(400'000, &fx);
  EXPECT_TRUE(HasEvent(fx, "job/1",
                       "telemetry: its GPUs' clocks, PCIe links and temperatures match the gang's "
                       "others (look outside the GPU: its CPU, network or data)"));
}

// Link telemetry: the straggler's node reports InfiniBand symbol errors over the health rule's
// limit; the event names them beside the GPUs' verdict.
TEST_F(ProgressStateTest, AStragglersEventNamesItsNodesInfiniBandErrors) {
  RunGang("{straggler_factor: 1.5, straggler_reports: 2}");
  Effects fx;
  for (const char* node : {"a", "b"}) Beat(node, 1980, 1000, &fx);
  for (Time t : {1000, 1500}) {
    pb::Heartbeat hb;
    pb::IbPortSample* port = hb.add_ib_ports();
    port->set_device("mlx5_0");
    port->set_port(1);
    port->set_state("4: ACTIVE");
    (*port->mutable_counters())["symbol_error"] = t == 1000 ? 0 : 50;
    ASSERT_TRUE(state_->OnHeartbeat("b", hb, t, &fx));
  }
  ReportSteps(400'000, &fx);
  EXPECT_TRUE(HasEvent(fx, "job/1",
                       "(look outside the GPU: its CPU, network or data); its node's fabric: "
                       "InfiniBand mlx5_0 port 1: 50 symbol_error in the last 1s (limit 10/s)"));
}

TEST_F(ProgressStateTest, AStragglerIsNamedWithItsNode) {
  RunGang("{straggler_factor: 1.5, straggler_reports: 2}");
  Effects fx;
  ReportSteps(400'000, &fx);
  EXPECT_TRUE(
      HasEvent(fx, "job/1",
               "straggler: rank 1 on node b takes 0.400 s a step, against the gang's median "
               "0.100 s (over 1.50x for 2 reports in a row)"));
  EXPECT_TRUE(HasEvent(fx, "node/b", "suspect: straggler: rank 1"));
  EXPECT_EQ(state_->GetJob(1)->progress["ranks"][1]["straggler"], true);
  EXPECT_EQ(state_->GetJob(1)->state, "running") << "a straggler is named, not stopped";
  // Its node is suspect in the health engine (ranked last for new gangs), with the evidence.
  state_->EvaluateHealth(5'000, &fx);
  auto b = state_->GetNode("b");
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->state, "suspect");
  ASSERT_FALSE(b->conditions.empty());
  EXPECT_NE(b->conditions[0].find("rank 1 of job 1 takes 0.400 s a step, against its gang's "
                                  "median 0.100 s"),
            std::string::npos)
      << b->conditions[0];
  EXPECT_EQ(state_->GetNode("a")->state, "ready");
}

}  // namespace
}  // namespace hangar::controller
