// Hot spares in the controller (docs/goodput.md): a gang that loses a node keeps its healthy nodes
// and restarts in place on its leaf's spare, ahead of the queue; spares take no guaranteed work.
#include <gtest/gtest.h>

#include <map>

#include "controller/state/cluster_state.h"
#include "controller/state/state_test_util.h"

namespace hangar::controller {
namespace {

// Two leaves of three nodes, one spare in each (a-2 and b-2).
constexpr const char* kCluster =
    "node_defaults: {gpus: 8, gpu_model: H100, gpu_memory: 80Gi, cpu: 64, memory: 512Gi}\n"
    "fabric:\n"
    "  spines:\n"
    "    - name: s0\n"
    "      leaves:\n"
    "        - {name: l0, nodes: [{name: \"a-[0-2]\"}]}\n"
    "        - {name: l1, nodes: [{name: \"b-[0-2]\"}]}\n"
    "spares: {per: leaf, count: 1}\n";

constexpr const char* kGang =
    "name: gang\ntopology: {same: leaf, mode: required}\n"
    "checkpoint: {signal: SIGUSR1, grace: 30s}\n"
    "tasks:\n  - {replicas: 2, gpus: 8, command: [train]}\n";

class SparesStateTest : public ::testing::Test {
 protected:
  void SetUp() override {
    topology_ = testing::TopologyWithSpares(kCluster, &options_.spares);
    ASSERT_NE(topology_, nullptr);
    options_.require_validation = false;
    state_ = std::make_unique<ClusterState>(topology_, options_,
                                            std::move(sched::Scheduler::Create({})).value());
    for (const char* n : {"a-0", "a-1", "a-2", "b-0", "b-1", "b-2"}) Register(n, {});
  }
  void Register(const std::string& node, const std::vector<std::string>& running) {
    pb::Register r;
    r.mutable_inventory()->set_node(node);
    for (int i = 0; i < 8; ++i) r.mutable_inventory()->add_gpus()->set_index(i);
    for (const auto& id : running) r.add_running()->set_task_id(id);
    ASSERT_TRUE(state_->OnRegister(r, now_, &fx_).ok());
  }
  sched::JobId Submit(const std::string& text) {
    auto spec = job::ParseJobSpec(text, "job.yaml");
    EXPECT_TRUE(spec.ok()) << spec.status().message();
    auto id = state_->Submit(*spec, now_, &fx_);
    EXPECT_TRUE(id.ok());
    return id.ok() ? *id : 0;
  }
  void Report(const std::string& node, const std::string& task, pb::TaskStatus::State st) {
    pb::TaskStatus s;
    s.set_task_id(task);
    s.set_state(st);
    s.set_stopped(st == pb::TaskStatus::EXITED);
    ASSERT_TRUE(state_->OnTaskStatus(node, s, now_, &fx_).ok());
  }
  // Xid 79 (GPU fallen off the bus) on GPU 2 of `node`, and the health pass a second later: the
  // node drains.
  void Xid79(const std::string& node) {
    pb::GpuEvent xid;
    xid.set_index(2);
    xid.set_kind("xid");
    xid.set_code(79);
    state_->OnGpuEvent(node, xid, now_);
    now_ += 1000;
    state_->EvaluateHealth(now_, &fx_);
  }
  // `node` repaired (RMA) and idle: the next tick makes it its leaf's spare again.
  void RepairAndExpectSpare(const std::string& node) {
    ASSERT_TRUE(state_->Remediate(node, "repair", -1, "RMA", now_, &fx_).ok());
    now_ += 1000;
    state_->EvaluateHealth(now_, &fx_);
    state_->Tick(now_, &fx_);
    EXPECT_TRUE(state_->spares().IsSpare(*state_->topology().FindNode(node)))
        << state_->GetNode(node)->state;
  }
  // The node of task `index` of job `id`'s current attempt.
  std::string NodeOf(sched::JobId id, uint32_t index) {
    const auto job = state_->GetJob(id);  // not in the loop's header: that would dangle
    for (const auto& t : job->task_views) {
      if (t.index == index) return t.node;
    }
    return "";
  }
  std::set<std::string> NodesOf(sched::JobId id) {
    std::set<std::string> out;
    const auto job = state_->GetJob(id);
    for (const auto& t : job->task_views) out.insert(t.node);
    return out;
  }
  bool Said(const std::string& words) const {
    for (const auto& e : fx_.batch.events) {
      if (e.message.find(words) != std::string::npos) return true;
    }
    return false;
  }
  // Task `task` (JOB.ATTEMPT.INDEX) on `node` reports step `step`, each step taking `step_s`.
  void Progress(const std::string& node, const std::string& task, uint64_t step, double step_s) {
    pb::Progress p;
    p.set_task_id(task);
    p.set_step(step);
    p.set_step_time_us(static_cast<uint64_t>(step_s * 1e6));
    ASSERT_TRUE(state_->OnProgress(node, p, now_, &fx_).ok());
  }
  void CheckpointDone(const std::string& node, const std::string& task, uint64_t step) {
    pb::CheckpointDone c;
    c.set_task_id(task);
    c.set_step(step);
    c.set_path("/ckpt/" + std::to_string(step));
    ASSERT_TRUE(state_->OnCheckpointDone(node, c, now_, &fx_).ok());
  }
  std::shared_ptr<const cluster::Topology> topology_;
  ControllerOptions options_;
  std::unique_ptr<ClusterState> state_;
  Effects fx_;
  Time now_ = 1'000'000;
};

TEST_F(SparesStateTest, SparesTakeNoGuaranteedWork) {
  for (int i = 0; i < 5; ++i) Submit("name: one\ntasks: [{gpus: 8, command: [x]}]\n");
  state_->Schedule(now_, &fx_);
  int running = 0;
  for (sched::JobId id = 1; id <= 5; ++id) {
    const auto job = state_->GetJob(id);
    if (job->state == "pending") continue;
    ++running;
    EXPECT_FALSE(NodesOf(id).count("a-2") || NodesOf(id).count("b-2")) << id;
  }
  EXPECT_EQ(running, 4);
  EXPECT_EQ(state_->spares().PoolJson()["spares"], (nlohmann::json{"a-2", "b-2"}));
  EXPECT_NE(state_->GetNode("a-2")->reason.find("hot spare"), std::string::npos);
  EXPECT_EQ(state_->GetNode("a-1")->reason, "");
}

TEST_F(SparesStateTest, AGangKeepsItsHealthyNodeAndRestartsOnItsLeafsSpare) {
  const sched::JobId gang = Submit(kGang);
  state_->Schedule(now_, &fx_);
  const std::set<std::string> first = NodesOf(gang);
  ASSERT_EQ(first.size(), 2u);
  const std::string leaf = first.count("a-0") ? "a" : "b";
  ASSERT_EQ(first, (std::set<std::string>{leaf + "-0", leaf + "-1"}));
  const std::string healthy = NodeOf(gang, 0), failed = NodeOf(gang, 1);
  Report(healthy, "1.0.0", pb::TaskStatus::RUNNING);
  Report(failed, "1.0.1", pb::TaskStatus::RUNNING);
  // Two guaranteed jobs fill the other leaf's two nodes; a third waits.
  const sched::JobId other = Submit("name: one\ntasks: [{gpus: 8, command: [x]}]\n");
  Submit("name: one\ntasks: [{gpus: 8, command: [x]}]\n");
  const sched::JobId waiting = Submit("name: one\ntasks: [{gpus: 8, command: [x]}]\n");
  state_->Schedule(now_, &fx_);
  ASSERT_EQ(state_->GetJob(other)->state, "starting");
  ASSERT_EQ(state_->GetJob(waiting)->state, "pending");

  // Xid 79 on the gang's second node: it drains, the gang stops to restart in place.
  Xid79(failed);
  ASSERT_EQ(state_->GetJob(gang)->state, "preempting");
  EXPECT_TRUE(Said("node " + failed + " replaced in place by spare " + leaf + "-2 (leaf l" +
                   (leaf == "a" ? "0" : "1") + ")"));
  // The healthy node's task stops first: nobody else may take that node meanwhile.
  now_ += 1000;
  Report(healthy, "1.0.0", pb::TaskStatus::EXITED);
  state_->Schedule(now_, &fx_);
  EXPECT_EQ(state_->GetJob(waiting)->state, "pending");
  EXPECT_EQ(state_->GetJob(gang)->state, "preempting");
  // Once the failed node's task has stopped too, the gang runs again on its healthy node and the
  // spare, before the job that waited longer in the queue.
  now_ += 1000;
  Report(failed, "1.0.1", pb::TaskStatus::EXITED);
  state_->Schedule(now_, &fx_);
  const auto job = state_->GetJob(gang);
  EXPECT_EQ(job->state, "starting");
  EXPECT_EQ(job->attempt, 1u);
  EXPECT_EQ(NodeOf(gang, 0), healthy);
  EXPECT_EQ(NodeOf(gang, 1), leaf + "-2");
  EXPECT_EQ(state_->GetJob(waiting)->state, "pending");
  // Explained: the node replaced and the spare taken; the spare is no longer one.
  const nlohmann::json r = state_->spares().Json(gang);
  ASSERT_EQ(r["replacements"].size(), 1u);
  EXPECT_EQ(r["replacements"][0]["failed"], failed);
  EXPECT_EQ(r["replacements"][0]["with"], leaf + "-2");
  EXPECT_EQ(r["replacements"][0]["spare"], true);
  EXPECT_FALSE(state_->spares().IsSpare(*state_->topology().FindNode(leaf + "-2")));
  // The goodput ledger counts it under its cause.
  const GoodputLedger::Job* g = state_->goodput().Find(gang);
  ASSERT_NE(g, nullptr);
  ASSERT_EQ(g->interruptions.size(), 1u);
  EXPECT_EQ(g->interruptions[0].cause, "health");
  // Repaired and idle, the failed node brings its leaf back to its count of spares.
  RepairAndExpectSpare(failed);
  EXPECT_TRUE(Said("a spare again"));
  EXPECT_EQ(state_->spares().missing(), 0u);
}

// A controller restarted after a spare was taken: the pool starts from cluster.yaml, where the
// taken node is a spare again; it holds the gang's task, so it is taken again (not a spare the
// scheduler must keep empty, with its domain short of a real one), and the repaired node becomes
// the leaf's spare as before the restart.
TEST_F(SparesStateTest, ASpareTakenBeforeARestartStaysTaken) {
  const sched::JobId gang = Submit(kGang);
  state_->Schedule(now_, &fx_);
  const std::string healthy = NodeOf(gang, 0), failed = NodeOf(gang, 1);
  const std::string leaf = healthy.substr(0, 1);
  Report(healthy, "1.0.0", pb::TaskStatus::RUNNING);
  Report(failed, "1.0.1", pb::TaskStatus::RUNNING);
  Xid79(failed);
  now_ += 1000;
  Report(healthy, "1.0.0", pb::TaskStatus::EXITED);
  Report(failed, "1.0.1", pb::TaskStatus::EXITED);
  state_->Schedule(now_, &fx_);
  ASSERT_EQ(NodeOf(gang, 1), leaf + "-2");
  Report(leaf + "-2", "1.1.1", pb::TaskStatus::RUNNING);

  auto store = NewMemoryStore();
  ASSERT_TRUE(store->Commit(fx_.batch).ok());
  // A new controller on the same cluster.yaml and store; its agents come back with their tasks.
  state_ = std::make_unique<ClusterState>(topology_, options_,
                                          std::move(sched::Scheduler::Create({})).value());
  ASSERT_TRUE(state_->Restore(*store->Load(), now_).ok());
  for (const char* n : {"a-0", "a-1", "a-2", "b-0", "b-1", "b-2"}) {
    const std::string node = n;
    Register(node, node == healthy       ? std::vector<std::string>{"1.1.0"}
                   : node == leaf + "-2" ? std::vector<std::string>{"1.1.1"}
                                         : std::vector<std::string>{});
  }
  const uint32_t taken = *state_->topology().FindNode(leaf + "-2");
  EXPECT_FALSE(state_->spares().IsSpare(taken));
  EXPECT_EQ(state_->spares().missing(), 1u);
  EXPECT_EQ(state_->GetJob(gang)->attempt, 1u);
  RepairAndExpectSpare(failed);
  EXPECT_EQ(state_->spares().missing(), 0u);
}

TEST_F(SparesStateTest, AGangWhoseNodeIsLostRestartsOnTheSpare) {
  const sched::JobId gang = Submit(kGang);
  state_->Schedule(now_, &fx_);
  const std::string leaf = NodesOf(gang).count("a-0") ? "a" : "b";
  const std::string healthy = NodeOf(gang, 0), lost = NodeOf(gang, 1);
  Report(healthy, "1.0.0", pb::TaskStatus::RUNNING);
  Report(lost, "1.0.1", pb::TaskStatus::RUNNING);
  // Every other node beats for 4 s; `lost` is silent past the 3 s heartbeat timeout.
  pb::Heartbeat hb;
  for (Time t = now_; t <= now_ + 4000; t += 100) {
    hb.set_time_ms(t);
    for (const char* n : {"a-0", "a-1", "a-2", "b-0", "b-1", "b-2"}) {
      if (n != lost) state_->OnHeartbeat(n, hb, t);
    }
  }
  now_ += 4000;
  state_->CheckHeartbeats(now_, &fx_);
  ASSERT_EQ(state_->GetNode(lost)->state, "lost");
  EXPECT_TRUE(Said("node " + lost + " replaced in place by spare " + leaf + "-2"));
  // The lost node's task counts as ended (no lease here); the healthy one stops, then the gang
  // runs on its healthy node and the spare.
  state_->Schedule(now_, &fx_);
  EXPECT_EQ(state_->GetJob(gang)->state, "preempting");
  Report(healthy, "1.0.0", pb::TaskStatus::EXITED);
  state_->Schedule(now_, &fx_);
  EXPECT_EQ(state_->GetJob(gang)->state, "starting");
  EXPECT_EQ(NodeOf(gang, 0), healthy);
  EXPECT_EQ(NodeOf(gang, 1), leaf + "-2");
  const GoodputLedger::Job* g = state_->goodput().Find(gang);
  ASSERT_NE(g, nullptr);
  ASSERT_EQ(g->interruptions.size(), 1u);
  EXPECT_EQ(g->interruptions[0].cause, "node_lost");
}

TEST_F(SparesStateTest, WithoutAFittingReplacementTheGangIsRequeuedWhole) {
  const sched::JobId gang = Submit(kGang);
  state_->Schedule(now_, &fx_);
  const std::string leaf = NodesOf(gang).count("a-0") ? "a" : "b";
  const std::string failed = NodeOf(gang, 1);
  Report(NodeOf(gang, 0), "1.0.0", pb::TaskStatus::RUNNING);
  Report(failed, "1.0.1", pb::TaskStatus::RUNNING);
  // The operator drains the leaf's spare, then a node of the gang: its rule keeps it in its leaf,
  // where nothing is left.
  ASSERT_TRUE(state_->Drain(leaf + "-2", "maintenance", now_, &fx_).ok());
  ASSERT_TRUE(state_->Drain(failed, "maintenance", now_, &fx_).ok());
  now_ += 1000;
  state_->EvaluateHealth(now_, &fx_);
  ASSERT_EQ(state_->GetJob(gang)->state, "preempting");
  EXPECT_TRUE(Said("no spare or free node can replace node " + failed));
  EXPECT_TRUE(state_->spares().Json(gang).is_null());
}

// A replacement keeps the job's node rules: a spare the job excludes is not taken (it was, before
// the node rules were checked here), and nothing else in its leaf can take the tasks.
TEST_F(SparesStateTest, AReplacementNeverTakesANodeTheJobExcludes) {
  const sched::JobId gang = Submit(
      "name: gang\ntopology: {same: leaf, mode: required}\nexclude_nodes: [a-2, b-2]\n"
      "checkpoint: {signal: SIGUSR1, grace: 30s}\n"
      "tasks:\n  - {replicas: 2, gpus: 8, command: [train]}\n");
  state_->Schedule(now_, &fx_);
  const std::string healthy = NodeOf(gang, 0), failed = NodeOf(gang, 1);
  Report(healthy, "1.0.0", pb::TaskStatus::RUNNING);
  Report(failed, "1.0.1", pb::TaskStatus::RUNNING);
  Xid79(failed);
  ASSERT_EQ(state_->GetJob(gang)->state, "preempting");
  EXPECT_TRUE(Said("no spare or free node can replace node " + failed));
  EXPECT_FALSE(Said("replaced in place by spare"));
}

// A rank named a straggler (its GPU slowed to 0.7x: 0.286 s a step against 0.2 s) is not stopped
// at once: at the gang's next checkpoint its node gives way to the leaf's spare in place, the gang
// keeping its other node; the goodput ledger counts it under "straggler". A rank that is no
// longer slow by then is left where it is.
TEST_F(SparesStateTest, AStragglersNodeIsReplacedAtTheGangsNextCheckpoint) {
  const sched::JobId gang = Submit(
      "name: gang\ntopology: {same: leaf, mode: required}\n"
      "checkpoint: {signal: SIGUSR1, grace: 30s}\n"
      "progress: {straggler_factor: 1.2, straggler_reports: 3}\n"
      "tasks:\n  - {replicas: 2, gpus: 8, command: [train]}\n");
  state_->Schedule(now_, &fx_);
  const std::string fast = NodeOf(gang, 0), slow = NodeOf(gang, 1);
  const std::string leaf = fast.substr(0, 1);
  Report(fast, "1.0.0", pb::TaskStatus::RUNNING);
  Report(slow, "1.0.1", pb::TaskStatus::RUNNING);
  for (uint64_t step = 1; step <= 4; ++step) {
    now_ += 300;
    Progress(fast, "1.0.0", step, 0.2);
    Progress(slow, "1.0.1", step, 0.286);
  }
  ASSERT_TRUE(Said("straggler: rank 1 on node " + slow + " takes 0.286 s a step"));
  EXPECT_EQ(state_->GetJob(gang)->state, "running") << "named, not stopped";
  // The next checkpoint: the straggler's node is replaced in place by the leaf's spare.
  now_ += 300;
  CheckpointDone(fast, "1.0.0", 4);
  ASSERT_EQ(state_->GetJob(gang)->state, "preempting");
  EXPECT_TRUE(Said("node " + slow + " replaced in place by spare " + leaf + "-2"));
  now_ += 1000;
  Report(fast, "1.0.0", pb::TaskStatus::EXITED);
  Report(slow, "1.0.1", pb::TaskStatus::EXITED);
  state_->Schedule(now_, &fx_);
  EXPECT_EQ(state_->GetJob(gang)->attempt, 1u);
  EXPECT_EQ(NodeOf(gang, 0), fast);
  EXPECT_EQ(NodeOf(gang, 1), leaf + "-2");
  const GoodputLedger::Job* g = state_->goodput().Find(gang);
  ASSERT_NE(g, nullptr);
  ASSERT_EQ(g->interruptions.size(), 1u);
  EXPECT_EQ(g->interruptions[0].cause, "straggler");

  // In the new attempt the rank on the spare is named a straggler too, then is fast again before
  // the checkpoint: nothing is replaced.
  Report(fast, "1.1.0", pb::TaskStatus::RUNNING);
  Report(leaf + "-2", "1.1.1", pb::TaskStatus::RUNNING);
  for (uint64_t step = 5; step <= 8; ++step) {
    now_ += 300;
    Progress(fast, "1.1.0", step, 0.2);
    Progress(leaf + "-2", "1.1.1", step, step < 8 ? 0.3 : 0.2);
  }
  ASSERT_TRUE(Said("straggler: rank 1 on node " + leaf + "-2 takes 0.300 s a step"));
  now_ += 300;
  CheckpointDone(fast, "1.1.0", 8);
  EXPECT_EQ(state_->GetJob(gang)->state, "running");
  EXPECT_EQ(state_->GetJob(gang)->attempt, 1u);
}

// Spares are not idle: opportunistic work runs there (guaranteed work never does), and the gang
// that takes a spare evicts it -- checkpoint signal first, its GPUs held for the gang as they are
// freed -- then restarts there in place.
TEST_F(SparesStateTest, OpportunisticWorkRunsOnSparesUntilAReplacementEvictsIt) {
  const sched::JobId gang = Submit(kGang);
  state_->Schedule(now_, &fx_);
  const std::string healthy = NodeOf(gang, 0), failed = NodeOf(gang, 1);
  const std::string leaf = healthy.substr(0, 1), other = leaf == "a" ? "b" : "a";
  Report(healthy, "1.0.0", pb::TaskStatus::RUNNING);
  Report(failed, "1.0.1", pb::TaskStatus::RUNNING);
  // Guaranteed work fills the other leaf's two nodes; opportunistic work then runs on the spares.
  const sched::JobId g2 = Submit("name: g\ntasks: [{gpus: 8, command: [x]}]\n");
  const sched::JobId g3 = Submit("name: g\ntasks: [{gpus: 8, command: [x]}]\n");
  const std::string opp =
      "name: scavenger\ntier: opportunistic\ncheckpoint: {signal: SIGUSR1, grace: 30s}\n"
      "tasks: [{gpus: 8, command: [x]}]\n";
  state_->Schedule(now_, &fx_);
  // A guaranteed job does not take a spare, even an idle one; it says why it waits.
  const sched::JobId g4 = Submit("name: g\ntasks: [{gpus: 8, command: [x]}]\n");
  state_->Schedule(now_, &fx_);
  EXPECT_EQ(state_->GetJob(g4)->state, "pending");
  EXPECT_NE(state_->GetJob(g4)->reason.find("hot spares"), std::string::npos)
      << state_->GetJob(g4)->reason;
  const sched::JobId o1 = Submit(opp);
  const sched::JobId o2 = Submit(opp);
  state_->Schedule(now_, &fx_);
  EXPECT_EQ(NodesOf(g2).count(other + "-2") + NodesOf(g3).count(other + "-2"), 0u);
  std::set<std::string> on;
  for (sched::JobId o : {o1, o2}) {
    ASSERT_EQ(state_->GetJob(o)->state, "starting") << o;
    on.insert(NodeOf(o, 0));
  }
  EXPECT_EQ(on, (std::set<std::string>{"a-2", "b-2"})) << "opportunistic work on both spares";
  const sched::JobId on_ours = NodeOf(o1, 0) == leaf + "-2" ? o1 : o2;
  Report(leaf + "-2", std::to_string(on_ours) + ".0.0", pb::TaskStatus::RUNNING);
  EXPECT_TRUE(state_->spares().IsSpare(*state_->topology().FindNode(leaf + "-2")));
  EXPECT_EQ(state_->GetJob(g4)->state, "pending");

  // The gang's node fails: the leaf's spare replaces it, and the scavenger there makes way.
  Xid79(failed);
  ASSERT_EQ(state_->GetJob(gang)->state, "preempting");
  EXPECT_TRUE(Said("node " + failed + " replaced in place by spare " + leaf + "-2"));
  EXPECT_TRUE(Said("preempted for job 1: its hot spare " + leaf + "-2 replaces node " + failed));
  EXPECT_EQ(state_->GetJob(on_ours)->state, "preempting");
  now_ += 1000;
  Report(healthy, "1.0.0", pb::TaskStatus::EXITED);
  Report(failed, "1.0.1", pb::TaskStatus::EXITED);
  state_->Schedule(now_, &fx_);
  EXPECT_EQ(state_->GetJob(gang)->state, "pending") << "its own tasks stopped; the scavenger not";
  EXPECT_EQ(state_->GetJob(g4)->state, "pending") << "nobody takes the gang's held node";
  now_ += 1000;
  Report(leaf + "-2", std::to_string(on_ours) + ".0.0", pb::TaskStatus::EXITED);
  state_->Schedule(now_, &fx_);
  const auto job = state_->GetJob(gang);
  EXPECT_EQ(job->state, "starting");
  EXPECT_EQ(NodeOf(gang, 0), healthy);
  EXPECT_EQ(NodeOf(gang, 1), leaf + "-2");
  EXPECT_NE(state_->GetJob(on_ours)->state, "starting") << "not back on the gang's node";
  const GoodputLedger::Job* g = state_->goodput().Find(on_ours);
  ASSERT_NE(g, nullptr);
  ASSERT_EQ(g->interruptions.size(), 1u);
  EXPECT_EQ(g->interruptions[0].cause, "preemption");

  // The failed node, repaired, takes the evicted work at once (the guaranteed job that waited is
  // gone); it still becomes the leaf's spare (a chaos run found a pool that never refilled because
  // such work got there first).
  ASSERT_TRUE(state_->Cancel(g4, now_, &fx_).ok());
  ASSERT_TRUE(state_->Remediate(failed, "repair", -1, "RMA", now_, &fx_).ok());
  now_ += 1000;
  state_->EvaluateHealth(now_, &fx_);
  state_->Schedule(now_, &fx_);
  ASSERT_EQ(NodeOf(on_ours, 0), failed);
  Report(failed, std::to_string(on_ours) + ".1.0", pb::TaskStatus::RUNNING);
  state_->Tick(now_, &fx_);
  EXPECT_TRUE(state_->spares().IsSpare(*state_->topology().FindNode(failed)));
  EXPECT_EQ(state_->GetJob(on_ours)->state, "running") << "its work runs on";
}

// A gang whose policy holds its healthy nodes (on_node_failure.wait_for_node) when nothing can
// replace a failed node: nobody takes them while it waits -- not the job that waited longer in the
// queue -- and once a node can take the failed node's tasks (here the failed node itself,
// repaired after its Xid) the gang restarts there in place, keeping its healthy node.
class HoldingGangTest : public SparesStateTest {
 protected:
  // The gang on leaf X's two nodes, the other leaf's two filled by guaranteed work and a third
  // such job waiting; X's spare drained, then an Xid 79 on the gang's node `failed_`.
  void StartAndFail(const std::string& wait) {
    gang_ = Submit(
        "name: gang\ntopology: {same: leaf, mode: required}\n"
        "checkpoint: {signal: SIGUSR1, grace: 30s}\n"
        "on_node_failure: {wait_for_node: " +
        wait + "}\ntasks:\n  - {replicas: 2, gpus: 8, command: [train]}\n");
    state_->Schedule(now_, &fx_);
    healthy_ = NodeOf(gang_, 0);
    failed_ = NodeOf(gang_, 1);
    leaf_ = healthy_.substr(0, 1);
    Report(healthy_, "1.0.0", pb::TaskStatus::RUNNING);
    Report(failed_, "1.0.1", pb::TaskStatus::RUNNING);
    Submit("name: one\ntasks: [{gpus: 8, command: [x]}]\n");
    Submit("name: one\ntasks: [{gpus: 8, command: [x]}]\n");
    waiting_ = Submit("name: one\ntasks: [{gpus: 8, command: [x]}]\n");
    state_->Schedule(now_, &fx_);
    ASSERT_EQ(state_->GetJob(waiting_)->state, "pending");
    ASSERT_TRUE(state_->Drain(leaf_ + "-2", "maintenance", now_, &fx_).ok());
    Xid79(failed_);
    ASSERT_EQ(state_->GetJob(gang_)->state, "preempting");
    ASSERT_TRUE(Said("no spare or free node can replace node " + failed_ +
                     " within the job's topology rule now: its healthy nodes (" + healthy_ +
                     ") are held for it up to "))
        << "said instead: " << fx_.batch.events.back().message;
    // Its tasks stop; the healthy node's GPUs stay with the gang.
    now_ += 1000;
    Report(healthy_, "1.0.0", pb::TaskStatus::EXITED);
    Report(failed_, "1.0.1", pb::TaskStatus::EXITED);
    state_->Schedule(now_, &fx_);
    state_->Tick(now_, &fx_);
    state_->Schedule(now_, &fx_);
  }
  sched::JobId gang_ = 0, waiting_ = 0;
  std::string healthy_, failed_, leaf_;
};

TEST_F(HoldingGangTest, TheGangRestartsInPlaceOnceTheFailedNodeIsBack) {
  StartAndFail("10m");
  EXPECT_EQ(state_->GetJob(gang_)->state, "pending");
  EXPECT_EQ(state_->GetJob(waiting_)->state, "pending") << "it must not take the held node";
  EXPECT_NE(state_->GetJob(gang_)->reason.find("holding its healthy nodes until"),
            std::string::npos)
      << state_->GetJob(gang_)->reason;
  const nlohmann::json r = state_->spares().Json(gang_);
  ASSERT_TRUE(r.contains("holding")) << r.dump();
  EXPECT_EQ(r["holding"]["failed"], failed_);
  EXPECT_EQ(r["holding"]["nodes"], nlohmann::json::array({healthy_}));
  EXPECT_EQ(r["holding"]["until_ms"], r["holding"]["since_ms"].get<int64_t>() + 600'000);
  // Minutes go by: still held.
  for (int i = 0; i < 5; ++i) {
    now_ += 60'000;
    state_->Tick(now_, &fx_);
    state_->Schedule(now_, &fx_);
  }
  EXPECT_EQ(state_->GetJob(waiting_)->state, "pending");
  // The failed node is repaired: the gang takes it back before the waiting job can.
  ASSERT_TRUE(state_->Remediate(failed_, "repair", -1, "RMA", now_, &fx_).ok());
  now_ += 1000;
  state_->EvaluateHealth(now_, &fx_);
  state_->Schedule(now_, &fx_);
  const auto job = state_->GetJob(gang_);
  EXPECT_EQ(job->state, "starting");
  EXPECT_EQ(job->attempt, 1u);
  EXPECT_EQ(NodeOf(gang_, 0), healthy_);
  EXPECT_EQ(NodeOf(gang_, 1), failed_);
  EXPECT_EQ(state_->GetJob(waiting_)->state, "pending");
  EXPECT_TRUE(Said("node " + failed_ + " replaced in place by itself, back in service (leaf l"));
  EXPECT_TRUE(Said("after its healthy nodes were held 5 min"));
  EXPECT_FALSE(state_->spares().Json(gang_).contains("holding"));
}

TEST_F(HoldingGangTest, TheHealthyNodesAreReleasedWhenTheWaitIsOver) {
  StartAndFail("30s");
  EXPECT_EQ(state_->GetJob(waiting_)->state, "pending");
  now_ += 20'000;
  state_->Tick(now_, &fx_);
  state_->Schedule(now_, &fx_);
  EXPECT_EQ(state_->GetJob(waiting_)->state, "pending") << "held for 30 s";
  now_ += 11'000;
  state_->Tick(now_, &fx_);
  state_->Schedule(now_, &fx_);
  EXPECT_TRUE(Said("held its healthy nodes 32 s for a node to replace node " + failed_ +
                   " (on_node_failure.wait_for_node): none could take its tasks"));
  // Released: the job that waited takes the healthy node; the gang waits in the queue, whole.
  EXPECT_EQ(state_->GetJob(waiting_)->state, "starting");
  EXPECT_EQ(NodeOf(waiting_, 0), healthy_);
  EXPECT_EQ(state_->GetJob(gang_)->state, "pending");
  EXPECT_FALSE(state_->spares().Json(gang_).contains("holding"));
}

TEST_F(HoldingGangTest, ACancelledGangGivesItsHeldNodesBack) {
  StartAndFail("10m");
  ASSERT_TRUE(state_->Cancel(gang_, now_, &fx_).ok());
  state_->Schedule(now_, &fx_);
  EXPECT_EQ(state_->GetJob(waiting_)->state, "starting");
  EXPECT_EQ(NodeOf(waiting_, 0), healthy_);
}

// The same policy on a cluster that keeps no spares (walking it found the restarted gang still
// said it would "restart in place once the previous attempt's tasks have stopped").
TEST(HoldingWithoutSparesTest, AGangHoldsItsNodeAndRestartsOnTheFailedOneBack) {
  constexpr const char* kPlain =
      "node_defaults: {gpus: 8, gpu_model: H100, gpu_memory: 80Gi, cpu: 64, memory: 512Gi}\n"
      "fabric:\n  spines:\n    - name: s0\n      leaves:\n"
      "        - {name: l0, nodes: [{name: \"n-[0-2]\"}]}\n";
  auto f = cluster::ParseClusterYaml(kPlain, "c.yaml");
  ASSERT_TRUE(f.ok()) << f.status().message();
  ControllerOptions options;
  options.require_validation = false;
  ClusterState state(f->topology, options, std::move(sched::Scheduler::Create({})).value());
  Effects fx;
  Time now = 1'000'000;
  for (const char* n : {"n-0", "n-1", "n-2"}) {
    pb::Register r;
    r.mutable_inventory()->set_node(n);
    for (int i = 0; i < 8; ++i) r.mutable_inventory()->add_gpus()->set_index(i);
    ASSERT_TRUE(state.OnRegister(r, now, &fx).ok());
  }
  auto submit = [&](const std::string& text) {
    auto spec = job::ParseJobSpec(text, "job.yaml");
    EXPECT_TRUE(spec.ok()) << spec.status().message();
    return *state.Submit(*spec, now, &fx);
  };
  auto report = [&](const std::string& node, const std::string& task, bool ended) {
    pb::TaskStatus st;
    st.set_task_id(task);
    st.set_state(ended ? pb::TaskStatus::EXITED : pb::TaskStatus::RUNNING);
    st.set_stopped(ended);
    ASSERT_TRUE(state.OnTaskStatus(node, st, now, &fx).ok());
  };
  const sched::JobId gang = submit(
      "name: gang\non_node_failure: {wait_for_node: 5m}\n"
      "tasks:\n  - {replicas: 2, gpus: 8, command: [train]}\n");
  state.Schedule(now, &fx);
  auto nodes_of = [&](sched::JobId id) {
    std::map<uint32_t, std::string> out;
    const auto job = state.GetJob(id);  // not in the loop's header: that would dangle
    for (const auto& t : job->task_views) out[t.index] = t.node;
    return out;
  };
  const std::map<uint32_t, std::string> on = nodes_of(gang);
  const sched::JobId filler = submit("name: f\ntasks: [{gpus: 8, command: [x]}]\n");
  state.Schedule(now, &fx);
  const sched::JobId taker = submit("name: t\ntasks: [{gpus: 8, command: [x]}]\n");
  state.Schedule(now, &fx);
  ASSERT_EQ(state.GetJob(filler)->state, "starting");
  report(on.at(0), "1.0.0", false);
  report(on.at(1), "1.0.1", false);
  pb::GpuEvent xid;  // GPU 2 fell off the bus: the node drains
  xid.set_index(2);
  xid.set_kind("xid");
  xid.set_code(79);
  state.OnGpuEvent(on.at(1), xid, now);
  now += 1000;
  state.EvaluateHealth(now, &fx);
  ASSERT_EQ(state.GetJob(gang)->state, "preempting");
  report(on.at(0), "1.0.0", true);
  report(on.at(1), "1.0.1", true);
  state.Schedule(now, &fx);
  EXPECT_EQ(state.GetJob(taker)->state, "pending") << "the held node is the gang's";
  ASSERT_TRUE(state.Remediate(on.at(1), "repair", -1, "RMA", now, &fx).ok());
  now += 1000;
  state.EvaluateHealth(now, &fx);
  state.Schedule(now, &fx);
  ASSERT_EQ(state.GetJob(gang)->state, "starting");
  EXPECT_EQ(nodes_of(gang), on);
  EXPECT_EQ(state.GetJob(taker)->state, "pending");
  state.Tick(now, &fx);
  const nlohmann::json r = state.spares().Json(gang);
  ASSERT_EQ(r["replacements"].size(), 1u) << r.dump();
  EXPECT_EQ(r["replacements"][0]["with"], on.at(1));
  EXPECT_EQ(r["waiting"], false) << "it has restarted";
}

}  // namespace
}  // namespace hangar::controller
