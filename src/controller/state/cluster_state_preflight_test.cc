// The gang preflight in the controller (docs/goodput.md, "Gang preflight"): a large gang's launches
// ask for it; a node it names is drained and replaced in place before the job starts; a pass is
// told in the job's events; a check that names no one requeues the gang.
#include <gtest/gtest.h>

#include <set>

#include "controller/state/cluster_state.h"
#include "controller/state/state_test_util.h"

namespace hangar::controller {
namespace {

// One leaf of four nodes, one of them a spare (n-3).
constexpr const char* kCluster =
    "node_defaults: {gpus: 8, gpu_model: H100, gpu_memory: 80Gi, cpu: 64, memory: 512Gi}\n"
    "nodes: [{name: \"n-[0-3]\"}]\n"
    "spares: {nodes: [n-3]}\n";

constexpr const char* kGang =
    "name: gang\ncheckpoint: {signal: SIGUSR1, grace: 30s}\n"
    "tasks:\n  - {replicas: 4, gpus: 4, command: [train]}\n";

class PreflightStateTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto topology = testing::TopologyWithSpares(kCluster, &options_.spares);
    ASSERT_NE(topology, nullptr);
    options_.require_validation = false;
    options_.preflight.min_nodes = 2;
    options_.preflight.budget = 30 * kSecond;
    options_.preflight.allreduce_mib = 8;
    state_ = std::make_unique<ClusterState>(topology, options_,
                                            std::move(sched::Scheduler::Create({})).value());
    for (const char* n : {"n-0", "n-1", "n-2", "n-3"}) {
      pb::Register r;
      r.mutable_inventory()->set_node(n);
      r.mutable_inventory()->set_address("10.0.0." + std::string(1, n[2]));
      for (int i = 0; i < 8; ++i) r.mutable_inventory()->add_gpus()->set_index(i);
      ASSERT_TRUE(state_->OnRegister(r, now_, &fx_).ok());
    }
  }
  sched::JobId Submit(const std::string& text) {
    auto spec = job::ParseJobSpec(text, "job.yaml");
    EXPECT_TRUE(spec.ok()) << spec.status().message();
    auto id = state_->Submit(*spec, now_, &fx_);
    EXPECT_TRUE(id.ok());
    return id.ok() ? *id : 0;
  }
  // The launches sent since the last call, by task id.
  std::map<std::string, std::pair<std::string, pb::Launch>> Launches() {
    std::map<std::string, std::pair<std::string, pb::Launch>> out;
    for (const auto& m : fx_.messages) {
      if (m.message.has_launch()) out[m.message.launch().task_id()] = {m.node, m.message.launch()};
    }
    fx_.messages.clear();
    return out;
  }
  void Report(const std::string& node, const std::string& task, pb::TaskStatus::State st,
              const pb::PreflightReport* preflight = nullptr, bool stopped = false) {
    pb::TaskStatus s;
    s.set_task_id(task);
    s.set_state(st);
    s.set_stopped(stopped);
    if (preflight) *s.mutable_preflight() = *preflight;
    if (st == pb::TaskStatus::FAILED_TO_START) s.set_message("gang preflight failed");
    ASSERT_TRUE(state_->OnTaskStatus(node, s, now_, &fx_).ok());
  }
  bool Said(const std::string& words) const {
    for (const auto& e : fx_.batch.events) {
      if (e.message.find(words) != std::string::npos) return true;
    }
    return false;
  }
  ControllerOptions options_;
  std::unique_ptr<ClusterState> state_;
  Effects fx_;
  Time now_ = 1'000'000;
};

TEST_F(PreflightStateTest, AGangOverEnoughNodesAsksEveryTaskForThePreflight) {
  const sched::JobId gang = Submit(kGang);
  state_->Schedule(now_, &fx_);
  auto launches = Launches();
  ASSERT_EQ(launches.size(), 4u);
  std::set<std::string> nodes;
  int node_checks = 0;
  std::string store;
  for (const auto& [id, nl] : launches) {
    const pb::Launch& l = nl.second;
    nodes.insert(nl.first);
    ASSERT_TRUE(l.has_preflight()) << id;
    const pb::Preflight& p = l.preflight();
    EXPECT_EQ(p.rank(), l.task_index());
    EXPECT_EQ(p.world(), 4u);
    EXPECT_EQ(p.budget_ms(), 30 * kSecond);
    EXPECT_EQ(p.allreduce_bytes(), 8u << 20);
    EXPECT_EQ(p.store_port(), std::stoi(l.env().at("MASTER_PORT")));
    EXPECT_EQ(p.store_host(), l.env().at("MASTER_ADDR"));
    EXPECT_EQ(p.host(), "10.0.0." + nl.first.substr(2));
    node_checks += p.node_check();
  }
  EXPECT_EQ(node_checks, static_cast<int>(nodes.size()));  // one task per node checks it
  EXPECT_EQ(state_->GetJob(gang)->state, "starting");

  // A one-node job asks for none.
  Submit("name: one\ntasks: [{gpus: 8, command: [x]}]\n");
  state_->Schedule(now_, &fx_);
  for (const auto& [id, nl] : Launches()) EXPECT_FALSE(nl.second.has_preflight()) << id;
}

TEST_F(PreflightStateTest, APassIsToldAndTheGangRuns) {
  const sched::JobId gang = Submit(kGang);
  state_->Schedule(now_, &fx_);
  auto launches = Launches();
  pb::PreflightReport ok;
  ok.set_ok(true);
  ok.set_summary("2 node check(s) passed; all-reduce of 8 MiB across 4 ranks: 3.10 GB/s");
  ok.set_seconds(1.4);
  for (const auto& [id, nl] : launches) Report(nl.first, id, pb::TaskStatus::RUNNING, &ok);
  EXPECT_EQ(state_->GetJob(gang)->state, "running");
  EXPECT_TRUE(
      Said("gang preflight passed on 2 nodes in 1.4 s before attempt 0: 2 node check(s) "
           "passed; all-reduce of 8 MiB across 4 ranks: 3.10 GB/s"));
}

TEST_F(PreflightStateTest, ANodeThatFailsIsDrainedAndReplacedBeforeTheJobStarts) {
  const sched::JobId gang = Submit(kGang);
  state_->Schedule(now_, &fx_);
  auto launches = Launches();
  const std::string bad = launches.at("1.0.3").first;  // rank 3's node
  pb::PreflightReport failed;
  failed.set_summary("rank 3: GPU 1's gemm_tflops 693.0 is 70% of the gang's median 990.0");
  failed.add_failed_ranks(3);
  // The first report decides; the others are of an attempt already replaced.
  Report(launches.at("1.0.0").first, "1.0.0", pb::TaskStatus::FAILED_TO_START, &failed);
  EXPECT_TRUE(Said("drained: failed the gang preflight of job 1: rank 3: GPU 1's gemm_tflops"));
  EXPECT_TRUE(Said("node " + bad + " failed the gang preflight before attempt 0 started"));
  EXPECT_TRUE(Said("node " + bad + " replaced in place by spare n-3"));
  EXPECT_EQ(state_->GetNode(bad)->state, "drained");
  for (const auto& [id, nl] : launches) {
    if (id != "1.0.0")
      Report(nl.first, id, pb::TaskStatus::FAILED_TO_START, &failed, /*stopped=*/true);
  }
  EXPECT_NE(state_->GetJob(gang)->state, "failed");
  now_ += 1000;
  state_->Schedule(now_, &fx_);
  const auto job = state_->GetJob(gang);
  EXPECT_EQ(job->state, "starting") << job->message;
  EXPECT_EQ(job->attempt, 1u);
  std::set<std::string> now_on;
  for (const auto& t : job->task_views) now_on.insert(t.node);
  EXPECT_FALSE(now_on.count(bad));
  EXPECT_TRUE(now_on.count("n-3"));
  // The new attempt checks its nodes again, the spare among them.
  auto again = Launches();
  ASSERT_FALSE(again.empty());
  for (const auto& [id, nl] : again) EXPECT_TRUE(nl.second.has_preflight()) << id;
}

TEST_F(PreflightStateTest, AFailureThatNamesNoNodeRequeuesTheGangAndThenStopsAsking) {
  const sched::JobId gang = Submit(kGang);
  for (uint32_t round = 0; round < 4; ++round) {
    SCOPED_TRACE("round " + std::to_string(round));
    state_->Schedule(now_, &fx_);
    auto launches = Launches();
    ASSERT_EQ(launches.size(), 4u);
    const bool asks = launches.begin()->second.second.has_preflight();
    EXPECT_EQ(asks, round < 3);
    if (!asks) break;
    pb::PreflightReport blind;
    blind.set_summary("the all-reduce failed: Connection reset by peer");
    for (const auto& [id, nl] : launches) {
      EXPECT_NE(state_->GetJob(gang)->state, "pending");  // until the last one has ended
      Report(nl.first, id, pb::TaskStatus::FAILED_TO_START, &blind);
    }
    EXPECT_EQ(state_->GetJob(gang)->state, "pending");
    EXPECT_TRUE(Said("gang preflight failed without naming a node (the all-reduce failed"));
    for (const char* n : {"n-0", "n-1", "n-2", "n-3"})
      EXPECT_NE(state_->GetNode(n)->state, "drained");
    now_ += 1000;
  }
  EXPECT_TRUE(Said("starts next time without a preflight"));
}

}  // namespace
}  // namespace hangar::controller
