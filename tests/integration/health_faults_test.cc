// Fault injection end to end (issue 5, "Must show"): a real controller and four real agents with
// fake GPUs on loopback; faults are injected into a running agent by renaming a fault script to
// <state_dir>/inject-faults.yaml (docs/health.md), and everything is judged by what the HTTP API
// shows. Each test prints what it measured ("[measured] ...").
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <thread>

#include "local_cluster.h"

namespace hangar::testing {
namespace {

namespace fs = std::filesystem;

const std::string kCluster = FourNodeTwoLeafCluster("faults");
const std::vector<std::string>& kNodes = kFourNodes;

Time Now() { return SystemClock::Default()->Now(); }

// The node's conditions, one per line, for messages and searches.
std::string Conditions(const nlohmann::json& node) {
  std::string out;
  if (!node.is_object() || !node.contains("conditions")) return out;
  for (const auto& c : node["conditions"]) out += c.get<std::string>() + "\n";
  return out;
}

// The value of a per-GPU series on /metrics for the GPU with this UUID; -1 when absent.
double MetricOf(const std::string& text, const std::string& name, const std::string& uuid) {
  for (const std::string& line : Lines(text)) {
    if (line.rfind(name + "{", 0) != 0 || !Contains(line, "uuid=\"" + uuid + "\"")) continue;
    return std::stod(line.substr(line.rfind(' ') + 1));
  }
  return -1;
}

class HealthFaultsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    cluster_ = std::make_unique<LocalCluster>(kCluster);
    cluster_->StartController();
    fs::create_directories(Out());
  }

  // Starts these agents and waits until every one has passed validation ("ready").
  void StartReady(const std::vector<std::string>& nodes) {
    for (const auto& n : nodes) cluster_->StartAgent(n);
    WaitReady(nodes);
  }
  void WaitReady(const std::vector<std::string>& nodes) {
    ASSERT_TRUE(cluster_->WaitForNodesReady(nodes)) << cluster_->Get("/v1/nodes").dump(2);
  }

  nlohmann::json Node(const std::string& name) { return cluster_->Get("/v1/nodes/" + name); }
  // The time of the node's first event whose message contains `part`; 0 when there is none yet.
  // Events reach the API once stored, a moment after the state they describe.
  Time EventTime(const std::string& node, const std::string& part) {
    Time at = 0;
    const auto n = Node(node);  // not Node(node)["events"] in the loop header: that would dangle
    if (!n.is_object() || !n.contains("events")) return 0;
    for (const auto& e : n["events"]) {
      const Time t = e.value("time_ms", Time{0});
      if (Contains(e.value("message", ""), part) && (at == 0 || t < at)) at = t;
    }
    return at;
  }
  Time WaitForEvent(const std::string& node, const std::string& part,
                    Duration timeout = 5 * kSecond) {
    Time at = 0;
    LocalCluster::WaitFor([&] { return (at = EventTime(node, part)) != 0; }, timeout);
    return at;
  }
  std::string Out() { return cluster_->dir() + "/out"; }
  std::string AgentDir(const std::string& node) { return cluster_->dir() + "/agents/" + node; }

  uint64_t Submit(const std::string& yaml) {
    int status = 0;
    auto r = cluster_->Post("/v1/jobs", yaml, &status);
    EXPECT_EQ(status, 201) << r.dump();
    return r.is_object() ? r.value("id", uint64_t{0}) : 0;
  }
  void Cancel(uint64_t id) {
    int status = 0;
    cluster_->Post("/v1/jobs/" + std::to_string(id) + "/cancel", "", &status);
  }
  std::set<std::string> NodesOf(uint64_t id) {
    std::set<std::string> nodes;
    auto j = cluster_->Job(id);
    for (const auto& t : j["task_list"]) nodes.insert(t["node"].get<std::string>());
    return nodes;
  }

  // Injects a fault script into a running agent the documented way: written beside, renamed into
  // place. Returns when the agent has applied it, with the wall time of the rename in `injected`
  // and, in `applied`, when the agent picked it up (the time of its rename to .applied; the fake
  // GPU breaks then, for faults at 0s).
  void Inject(const std::string& node, const std::string& script, Time* injected = nullptr,
              Time* applied = nullptr) {
    const std::string dir = AgentDir(node);
    const std::string path = dir + "/inject-faults.yaml";
    fs::remove(path + ".applied");
    fs::remove(path + ".rejected");
    std::ofstream(dir + "/faults.tmp") << script;
    const Time t0 = Now();
    fs::rename(dir + "/faults.tmp", path);
    ASSERT_TRUE(LocalCluster::WaitFor(
        [&] { return fs::exists(path + ".applied") || fs::exists(path + ".rejected"); },
        10 * kSecond))
        << "agent " << node << " did not pick up " << path;
    ASSERT_TRUE(fs::exists(path + ".applied"))
        << "agent " << node << " rejected the fault script:\n"
        << script << "\nsee " << cluster_->dir() << "/agent-" << node << ".log";
    struct stat st {};
    Time picked = t0;
    if (::stat((path + ".applied").c_str(), &st) == 0) {
      // A rename updates the file's ctime: that is the moment the agent took it.
      picked = std::max<Time>(
          t0, static_cast<Time>(st.st_ctim.tv_sec) * 1000 + st.st_ctim.tv_nsec / 1'000'000);
    }
    if (injected) *injected = t0;
    if (applied) *applied = picked;
  }

  std::unique_ptr<LocalCluster> cluster_;
};

// Xid 79 (GPU fell off the bus) under a running two-node gang: the node drains within 2 s of the
// event, the gang's tasks get the checkpoint signal, and the gang runs again, whole, elsewhere.
TEST_F(HealthFaultsTest, Xid79UnderAGangDrainsTheNodeWithinTwoSecondsAndTheGangRunsAgainWhole) {
  StartReady(kNodes);
  // Each task records its run and its checkpoint signal (SIGUSR1, the default), and takes a
  // second over the checkpoint so that the draining state is there to be seen.
  const std::string out = Out();
  const uint64_t id = Submit(
      "name: gang\ntasks:\n  - replicas: 2\n    gpus: 8\n    command: [\"/bin/sh\", \"-c\", \""
      "trap 'echo $HANGAR_ATTEMPT $HANGAR_TASK_INDEX $HANGAR_NODE >> " +
      out +
      "/ckpts; sleep 1; exit 0' USR1; "
      "trap 'sleep 1; exit 0' TERM; "
      "echo $HANGAR_ATTEMPT $HANGAR_TASK_INDEX $HANGAR_NODE >> " +
      out +
      "/runs; "
      "sleep 1000 & wait\"]\n");
  ASSERT_TRUE(cluster_->WaitForJobState(id, "running", 15 * kSecond)) << cluster_->Job(id).dump(2);
  ASSERT_TRUE(LocalCluster::WaitFor([&] { return Lines(ReadFile(out + "/runs")).size() == 2; },
                                    10 * kSecond));
  auto job = cluster_->Job(id);
  const std::string victim = job["task_list"][0]["node"];
  ASSERT_EQ(NodesOf(id).size(), 2u);

  Time injected = 0, applied = 0;
  Inject(victim, "- {gpu: 3, kind: xid, code: 79}\n", &injected, &applied);
  std::string seen_state;
  ASSERT_TRUE(LocalCluster::WaitFor(
      [&] {
        seen_state = Node(victim).value("state", "");
        return seen_state == "draining" || seen_state == "quarantined";
      },
      10 * kSecond))
      << Node(victim).dump(2);
  const Time seen = Now();
  // The transition's own time, as the controller recorded it.
  const Time transition = WaitForEvent(victim, victim + ": healthy -> draining: xid_79");
  std::printf(
      "[measured] Xid 79 -> draining: %lld ms from the agent taking the fault to the state seen "
      "over "
      "HTTP (%lld ms to the controller's transition), %lld ms from the injection (the agent reads "
      "the "
      "fault script once a heartbeat, 1 s); first state seen: %s\n",
      static_cast<long long>(seen - applied), static_cast<long long>(transition - applied),
      static_cast<long long>(seen - injected), seen_state.c_str());
  // The bound, from the event; the agent's pickup of the script adds up to one heartbeat.
  EXPECT_LE(seen - applied, 2 * kSecond);
  EXPECT_LE(seen - injected, 3 * kSecond);
  EXPECT_GT(transition, 0) << "no '-> draining' transition among the node's events: "
                           << Node(victim).dump(2);
  EXPECT_EQ(seen_state, "draining")
      << "the tasks take a second over their checkpoint: draining should show";
  const auto drained = Node(victim);
  EXPECT_TRUE(Contains(drained.value("reason", ""), "Xid 79")) << drained.dump(2);

  // The gang runs again, whole, on healthy nodes: attempt 1, both tasks, none on the victim.
  ASSERT_TRUE(LocalCluster::WaitFor(
      [&] {
        auto j = cluster_->Job(id);
        return j["attempt"] == 1 && j["state"] == "running" &&
               Lines(ReadFile(out + "/runs")).size() == 4;
      },
      15 * kSecond))
      << cluster_->Job(id).dump(2) << "\n"
      << ReadFile(out + "/runs");
  std::printf(
      "[measured] Xid 79 -> gang running again (attempt 1, both tasks started): %lld ms from the "
      "injection\n",
      static_cast<long long>(Now() - injected));
  auto again = cluster_->Job(id);
  EXPECT_EQ(again["restarts"], 1);
  EXPECT_TRUE(Contains(again.value("message", ""), "Xid 79")) << again.dump(2);
  ASSERT_EQ(again["task_list"].size(), 2u);
  for (const auto& t : again["task_list"]) EXPECT_NE(t["node"], victim);
  EXPECT_EQ(NodesOf(id).size(), 2u);
  // Exactly two runs per attempt: attempt 0 on the old nodes, attempt 1 away from the victim.
  const auto runs = Lines(ReadFile(out + "/runs"));
  int first = 0, second = 0;
  for (const auto& r : runs) {
    if (r.rfind("0 ", 0) == 0) ++first;
    if (r.rfind("1 ", 0) == 0) {
      ++second;
      EXPECT_FALSE(Contains(r, " " + victim)) << r;
    }
  }
  EXPECT_EQ(first, 2) << ReadFile(out + "/runs");
  EXPECT_EQ(second, 2) << ReadFile(out + "/runs");
  // Both tasks of attempt 0 were asked to checkpoint (the one on the healthy node too).
  const auto ckpts = Lines(ReadFile(out + "/ckpts"));
  EXPECT_EQ(std::count_if(ckpts.begin(), ckpts.end(),
                          [](const std::string& c) { return c.rfind("0 ", 0) == 0; }),
            2)
      << ReadFile(out + "/ckpts");
  // Once its work is off, the node waits in quarantine for a reboot; nothing new goes there.
  EXPECT_TRUE(LocalCluster::WaitFor(
      [&] { return Node(victim).value("state", "") == "quarantined"; }, 10 * kSecond))
      << Node(victim).dump(2);
  EXPECT_EQ(Node(victim)["jobs"].size(), 0u);
  // Issue 15: an alert on state!="ready" sees it -- in the fleet counts, per node, and per GPU.
  const std::string metrics = cluster_->GetText("/metrics");
  EXPECT_TRUE(Contains(metrics, "hangar_nodes{state=\"quarantined\"} 1")) << metrics;
  EXPECT_TRUE(
      Contains(metrics, "hangar_node_state{node=\"" + victim + "\",state=\"quarantined\"} 1"));
  EXPECT_TRUE(Contains(metrics, "hangar_gpu_health_state{gpu=\"3\",uuid=\"GPU-fake-" + victim +
                                    "-3\",hostname=\"" + victim + "\",state=\"quarantined\"} 1"))
      << metrics;
  Cancel(id);
}

// A PCIe link that trained at Gen3 x4 instead of Gen5 x16: the GPU becomes suspect, and the reason
// says what the link is; suspect hardware still takes work, but last.
TEST_F(HealthFaultsTest, PcieDowngradeMakesTheGpuSuspectWithTheReason) {
  StartReady(kNodes);
  Inject("node-2", "- {gpu: 5, kind: pcie_downgrade, gen: 3, width: 4}\n");
  std::string conditions;
  ASSERT_TRUE(LocalCluster::WaitFor(
      [&] {
        conditions = Conditions(Node("node-2"));
        return Contains(conditions, "GPU 5 suspect");
      },
      10 * kSecond))
      << Node("node-2").dump(2);
  std::printf("[measured] node-2 conditions: %s", conditions.c_str());
  EXPECT_TRUE(Contains(conditions, "PCIe Gen5 x16 → Gen3 x4 on GPU 5")) << conditions;
  // The node's own state stays "ready" (the finding is the GPU's); the GPU's state is in its
  // conditions and its transition in the node's events.
  const auto node = Node("node-2");
  EXPECT_EQ(node.value("state", ""), "ready") << node.dump(2);
  bool transition = false;
  for (const auto& e : node["events"]) {
    const std::string m = e.value("message", "");
    transition |= Contains(m, "GPU 5: healthy -> suspect") && Contains(m, "pcie_link_degraded");
  }
  EXPECT_TRUE(transition) << node.dump(2);
  // Only that GPU: the other seven and the other nodes stay healthy.
  EXPECT_EQ(std::count(conditions.begin(), conditions.end(), '\n'), 1) << conditions;
  EXPECT_EQ(Node("node-1").value("state", ""), "ready");
  // The telemetry the rule read is on /metrics.
  const std::string metrics = cluster_->GetText("/metrics");
  EXPECT_EQ(MetricOf(metrics, "DCGM_FI_DEV_PCIE_LINK_WIDTH", "GPU-fake-node-2-5"), 4);
  EXPECT_EQ(MetricOf(metrics, "DCGM_FI_DEV_PCIE_LINK_GEN", "GPU-fake-node-2-5"), 3);
  // Ranked last: a whole-node job goes to node-1, node-2's clean neighbour under leaf-0 (the
  // placer's first leaf). Across leaves see SuspectNodeIsRankedLastAcrossLeaves.
  const uint64_t id =
      Submit("name: whole-node\ntasks:\n  - {gpus: 8, command: [sleep, \"1000\"]}\n");
  ASSERT_TRUE(cluster_->WaitForJobState(id, "running", 10 * kSecond)) << cluster_->Job(id).dump(2);
  EXPECT_EQ(NodesOf(id), std::set<std::string>{"node-1"}) << cluster_->Job(id).dump(2);
  Cancel(id);
}

// "Ranks suspect hardware last" holds across leaf switches too: three whole-node jobs on an empty
// cluster with one suspect node all go to the three clean nodes, although packing alone would
// put the second beside the first, on the suspect node (the placer searches clean nodes first,
// everywhere; docs/health.md).
TEST_F(HealthFaultsTest, SuspectNodeIsRankedLastAcrossLeaves) {
  StartReady(kNodes);
  Inject("node-2", "- {gpu: 5, kind: pcie_downgrade, gen: 3, width: 4}\n");
  ASSERT_TRUE(LocalCluster::WaitFor(
      [&] { return Contains(Conditions(Node("node-2")), "GPU 5 suspect"); }, 10 * kSecond));
  std::vector<uint64_t> ids;
  for (int i = 0; i < 3; ++i) {
    ids.push_back(Submit("name: whole-node-" + std::to_string(i) +
                         "\ntasks:\n  - {gpus: 8, command: [sleep, \"1000\"]}\n"));
    ASSERT_TRUE(cluster_->WaitForJobState(ids.back(), "running", 10 * kSecond))
        << cluster_->Job(ids.back()).dump(2);
    EXPECT_EQ(NodesOf(ids.back()).count("node-2"), 0u) << cluster_->Job(ids.back()).dump(2);
  }
  // ... but suspect hardware is still in the pool.
  ids.push_back(Submit("name: last\ntasks:\n  - {gpus: 8, command: [sleep, \"1000\"]}\n"));
  ASSERT_TRUE(cluster_->WaitForJobState(ids.back(), "running", 10 * kSecond))
      << cluster_->Job(ids.back()).dump(2);
  EXPECT_EQ(NodesOf(ids.back()), std::set<std::string>{"node-2"});
  for (uint64_t id : ids) Cancel(id);
}

// One GPU at 0.7x: its validation falls more than 5% below the fleet median, the node is degraded,
// and a new gang goes around it (a single-node job may still use it).
TEST_F(HealthFaultsTest, SlowGpuFailsValidationAgainstTheFleetMedianAndNewGangsAvoidIt) {
  // Three healthy nodes validate first, so that node-4's results meet a fleet median (the rule
  // needs three nodes' results of the same model) rather than only its own GPUs.
  StartReady({"node-1", "node-2", "node-3"});
  const std::string faults = cluster_->dir() + "/slow.yaml";
  std::ofstream(faults) << "faults:\n  - {at: 0s, gpu: 6, kind: slow, factor: 0.7}\n";
  const Time started = Now();
  cluster_->StartAgent("node-4", {"--faults", faults});
  nlohmann::json node;
  ASSERT_TRUE(LocalCluster::WaitFor(
      [&] {
        node = Node("node-4");
        return node.value("state", "") == "degraded";
      },
      15 * kSecond))
      << node.dump(2);
  std::printf("[measured] node-4 degraded %lld ms after its agent started; conditions:\n%s",
              static_cast<long long>(Now() - started), Conditions(node).c_str());
  const std::string conditions = Conditions(node);
  // Each of its figures is 30% low (the first one found is shown: d2h_gbs 35.0 GB/s against 50.0).
  EXPECT_TRUE(Contains(conditions, "GPU 6 degraded: GPU 6 ")) << conditions;
  EXPECT_TRUE(Contains(conditions, "is 30.0% below the fleet median for H100-SXM-80GB"))
      << conditions;
  // The node's all-reduce runs at its slowest GPU's pace: 0.7 x 400 GB/s.
  EXPECT_TRUE(Contains(conditions, "nccl_busbw_gbs 280.0 GB/s is 30.0% below the fleet median"))
      << conditions;
  for (const char* n : {"node-1", "node-2", "node-3"})
    EXPECT_EQ(Node(n).value("state", ""), "ready") << n;

  // A new gang that could span any three nodes avoids node-4.
  const uint64_t gang =
      Submit("name: gang\ntasks:\n  - replicas: 3\n    gpus: 8\n    command: [sleep, \"1000\"]\n");
  ASSERT_TRUE(cluster_->WaitForJobState(gang, "running", 10 * kSecond))
      << cluster_->Job(gang).dump(2);
  EXPECT_EQ(NodesOf(gang), (std::set<std::string>{"node-1", "node-2", "node-3"}))
      << cluster_->Job(gang).dump(2);
  // Degraded takes no new gangs, but single-node work still runs there.
  const uint64_t single =
      Submit("name: single\ntasks:\n  - {gpus: 8, command: [sleep, \"1000\"]}\n");
  ASSERT_TRUE(cluster_->WaitForJobState(single, "running", 10 * kSecond))
      << cluster_->Job(single).dump(2);
  EXPECT_EQ(NodesOf(single), std::set<std::string>{"node-4"});
  Cancel(gang);
  Cancel(single);
}

// Xid 13 is usually the application's fault: one incident changes nothing (a burst of them at
// once is one incident); a second incident on the same GPU within 24 h makes it suspect.
TEST_F(HealthFaultsTest, Xid13OnceIsNothingTwiceOnTheSameGpuIsSuspect) {
  StartReady(kNodes);
  // The driver logs one crash as a burst: two at the same moment are one incident.
  Time first = 0;
  Inject("node-1", "- {gpu: 2, kind: xid, code: 13}\n- {gpu: 2, kind: xid, code: 13}\n", nullptr,
         &first);
  const std::string uuid = "GPU-fake-node-1-2";
  ASSERT_TRUE(LocalCluster::WaitFor(
      [&] { return MetricOf(cluster_->GetText("/metrics"), "DCGM_FI_DEV_XID_ERRORS", uuid) == 13; },
      5 * kSecond))
      << "the controller never saw the Xid";
  // Give the health loop (every 0.5 s and on each event) time to act, were it going to.
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  auto node = Node("node-1");
  EXPECT_EQ(node.value("state", ""), "ready") << node.dump(2);
  EXPECT_EQ(Conditions(node), "") << node.dump(2);
  EXPECT_EQ(node.value("gpus_free", 0.0), 8.0);
  for (const auto& e : node["events"])
    EXPECT_FALSE(Contains(e.value("message", ""), "GPU 2:")) << e.dump();

  // A second incident, well after the burst: the GPU becomes suspect and asks for validation.
  const Time gap = 6500;
  std::this_thread::sleep_for(std::chrono::milliseconds(std::max<Time>(0, first + gap - Now())));
  Time second = 0;
  Inject("node-1", "- {gpu: 2, kind: xid, code: 13}\n", nullptr, &second);
  const std::string suspect =
      "node-1 GPU 2: healthy -> suspect: xid_13_repeated: Xid 13 on GPU 2 (graphics engine "
      "exception): 2 incidents "
      "within 1d; the GPU is suspect until it validates";
  const Time became = WaitForEvent("node-1", suspect);
  ASSERT_NE(became, 0) << Node("node-1").dump(2);
  std::printf(
      "[measured] second Xid 13 (%lld ms after the first) -> GPU 2 suspect %lld ms after the agent "
      "took it\n",
      static_cast<long long>(second - first), static_cast<long long>(became - second));
  // Suspect until it validates: the controller asks for a validation, which the fake GPUs pass at
  // once, and the GPU is back to healthy. Only that GPU was touched.
  EXPECT_NE(WaitForEvent("node-1", "node-1 GPU 2: suspect -> healthy"), 0)
      << Node("node-1").dump(2);
  int requested = 0;
  const auto after = Node("node-1");
  for (const auto& e : after["events"]) {
    const std::string m = e.value("message", "");
    requested += m == "validation requested" && e.value("time_ms", Time{0}) >= became;
    // GPU transitions read "node-1 GPU N: from -> to: ..."; other events may name GPUs too
    // ("registered (8 GPUs, ...)").
    EXPECT_FALSE(Contains(m, "node-1 GPU ") && !Contains(m, "node-1 GPU 2:")) << m;
  }
  EXPECT_GE(requested, 1) << Node("node-1").dump(2);
  EXPECT_EQ(Node("node-1").value("state", ""), "ready");
  EXPECT_EQ(Node("node-2").value("state", ""), "ready");
}

// Config drift: cluster.yaml expects driver 570.86.15; the fake GPUs' driver is fake-570.00. Every
// node gets a config_drift condition (degraded: no new gangs), and `hangar nodes` shows it.
TEST(HealthConfigDriftTest, NodeOffTheBaselineShowsConfigDriftInHangarNodes) {
  LocalCluster cluster(kCluster + "baselines:\n  - {driver: \"570.86.15\"}\n");
  cluster.StartController();
  for (const auto& n : kNodes) cluster.StartAgent(n);
  nlohmann::json node;
  ASSERT_TRUE(LocalCluster::WaitFor(
      [&] {
        node = cluster.Get("/v1/nodes/node-3");
        return node.is_object() && node.value("state", "") == "degraded";
      },
      15 * kSecond))
      << node.dump(2);
  EXPECT_TRUE(Contains(Conditions(node),
                       "warning config_drift (node): software differs from the baseline: driver "
                       "fake-570.00, expected 570.86.15; action: fix_config"))
      << node.dump(2);
  // The operator's view.
  const std::string cmd = "HANGAR_URL=http://127.0.0.1:" + std::to_string(cluster.api_port()) +
                          " " + HANGAR_BINARY + " nodes 2>&1";
  std::string out;
  if (FILE* p = popen(cmd.c_str(), "r")) {
    char buf[4096];
    for (size_t n; (n = fread(buf, 1, sizeof buf, p)) > 0;) out.append(buf, n);
    pclose(p);
  }
  std::printf("[measured] hangar nodes:\n%s", out.c_str());
  bool listed = false;
  for (const auto& line : Lines(out)) {
    if (!Contains(line, "node-3")) continue;
    listed = true;
    EXPECT_TRUE(Contains(line, "degraded")) << line;
    EXPECT_TRUE(Contains(line, "config_drift") || Contains(line, "differs from the baseline"))
        << line;
  }
  EXPECT_TRUE(listed) << out;
}

}  // namespace
}  // namespace hangar::testing
