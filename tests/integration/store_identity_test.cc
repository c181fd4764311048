// Issue 15, item 11: every task is tied to its store's identity. A controller started on the
// empty replacement of a lost store refuses the agents that served the old one (their task ids
// name the old store's jobs, so a new job 1 would be taken for the old job 1's result) and says
// why and what to do; an agent restarted with --forget-store stops the old store's tasks and
// serves the new one. A store restored from a backup keeps its identity, so its agents come
// back as they were. Real controller and agent processes on a SQLite store.
#include <gtest/gtest.h>
#include <signal.h>

#include <cstdio>
#include <filesystem>
#include <thread>

#include "local_cluster.h"

namespace hangar::testing {
namespace {

namespace fs = std::filesystem;

constexpr const char* kCluster =
    "node_defaults: {gpus: 2, gpu_model: H100-SXM-80GB, gpu_memory: 80Gi, cpu: 16, memory: 128Gi}\n"
    "nodes: [{name: node-1}]\n";

// `hangar ARGS`, stdout and stderr together; *rc its exit status.
std::string Hangar(const std::string& args, int* rc) {
  std::string out;
  FILE* p = ::popen((std::string(HANGAR_BINARY) + " " + args + " 2>&1").c_str(), "r");
  char buf[4096];
  for (size_t n; (n = std::fread(buf, 1, sizeof buf, p)) > 0;) out.append(buf, n);
  const int status = ::pclose(p);
  *rc = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return out;
}

bool Connected(LocalCluster& c) { return c.Get("/v1/nodes/node-1").value("connected", false); }

bool NodeEventSays(LocalCluster& c, const std::string& part) {
  for (const auto& e : c.Get("/v1/nodes/node-1").value("events", nlohmann::json::array())) {
    if (Contains(e.value("message", ""), part)) return true;
  }
  return false;
}

std::string Submit(LocalCluster& c, const std::string& command) {
  int status = 0;
  auto r = c.Post("/v1/jobs", "name: j\ntasks: [{gpus: 1, command: [sh, -c, '" + command + "']}]\n",
                  &status);
  EXPECT_EQ(status, 201) << r.dump();
  return r.dump();
}

TEST(StoreIdentityTest, AnAgentOfALostStoreIsRefusedUntilItForgetsItAndNoOldResultIsReplayed) {
  LocalCluster cluster(kCluster);
  cluster.StartController();
  cluster.StartAgent("node-1");
  ASSERT_TRUE(cluster.WaitForAgents(1, 20 * kSecond));
  const std::string old_pid = cluster.dir() + "/old.pid", ran = cluster.dir() + "/ran";
  Submit(cluster, "true");                                       // job 1: ends at once
  Submit(cluster, "echo $$ > " + old_pid + "; exec sleep 120");  // job 2: still running
  ASSERT_TRUE(cluster.WaitForJobState(1, "succeeded", 20 * kSecond)) << cluster.Job(1).dump();
  ASSERT_TRUE(cluster.WaitForJobState(2, "running", 20 * kSecond)) << cluster.Job(2).dump();
  ASSERT_TRUE(LocalCluster::WaitFor([&] { return !ReadFile(old_pid).empty(); }, 10 * kSecond));
  const pid_t old_task = std::stoi(ReadFile(old_pid));

  // The store is lost: the controller dies and its files are gone; a new one starts empty.
  cluster.KillController(SIGKILL);
  for (const char* suffix : {"", "-wal", "-shm"}) {
    fs::remove(cluster.dir() + "/state.db" + suffix);
  }
  cluster.StartController();

  // The agent, which served the old store, is refused: counted, and the node's events say why
  // and what to do.
  EXPECT_TRUE(LocalCluster::WaitFor(
      [&] {
        return Contains(cluster.GetText("/metrics"),
                        "hangar_agent_messages_refused_total{reason=\"foreign_store\"}");
      },
      20 * kSecond));
  ASSERT_TRUE(LocalCluster::WaitFor(
      [&] { return NodeEventSays(cluster, "restart its agent with --forget-store"); },
      20 * kSecond))
      << cluster.Get("/v1/nodes/node-1").dump();
  EXPECT_TRUE(NodeEventSays(cluster, "last served store"))
      << cluster.Get("/v1/nodes/node-1").dump();
  EXPECT_FALSE(Connected(cluster));

  // The new store's job 1 is not taken for the old job 1's end (before store identities it came
  // back `succeeded` in 10 ms without running): it waits, unplaced.
  Submit(cluster, "touch " + ran);
  std::this_thread::sleep_for(std::chrono::seconds(3));
  EXPECT_EQ(cluster.Job(1).value("state", ""), "pending") << cluster.Job(1).dump();
  EXPECT_FALSE(fs::exists(ran));
  EXPECT_EQ(::kill(old_task, 0), 0)
      << "the old store's task is left alone while its agent is refused";

  // The operator gives the node to the new store: the old store's task is stopped, and the
  // new job 1 runs for real.
  cluster.KillAgent("node-1", SIGTERM);
  cluster.StartAgent("node-1", {"--forget-store"});
  EXPECT_TRUE(cluster.WaitForJobState(1, "succeeded", 30 * kSecond)) << cluster.Job(1).dump();
  EXPECT_TRUE(fs::exists(ran)) << "job 1 of the new store ran";
  EXPECT_TRUE(LocalCluster::WaitFor([&] { return ::kill(old_task, 0) != 0; }, 10 * kSecond))
      << "the old store's task (pid " << old_task << ") still runs";
}

TEST(StoreIdentityTest, AStoreRestoredFromABackupKeepsItsIdentityAndItsAgents) {
  LocalCluster cluster(kCluster);
  cluster.StartController();
  cluster.StartAgent("node-1");
  ASSERT_TRUE(cluster.WaitForAgents(1, 20 * kSecond));
  Submit(cluster, "true");
  ASSERT_TRUE(cluster.WaitForJobState(1, "succeeded", 20 * kSecond)) << cluster.Job(1).dump();

  cluster.KillController(SIGTERM);
  const std::string db = "sqlite://" + cluster.dir() + "/state.db",
                    file = cluster.dir() + "/backup.jsonl";
  int rc = 0;
  std::string out = Hangar("backup --store " + db + " --out " + file, &rc);
  ASSERT_EQ(rc, 0) << out;
  for (const char* suffix : {"", "-wal", "-shm"}) fs::remove(cluster.dir() + "/state.db" + suffix);
  out = Hangar("restore --store " + db + " --in " + file, &rc);
  ASSERT_EQ(rc, 0) << out;
  cluster.StartController();

  // The same store: its agent is let in again and job 2 runs there.
  ASSERT_TRUE(LocalCluster::WaitFor([&] { return Connected(cluster); }, 20 * kSecond))
      << cluster.Get("/v1/nodes/node-1").dump();
  EXPECT_EQ(cluster.Job(1).value("state", ""), "succeeded");
  Submit(cluster, "true");
  EXPECT_TRUE(cluster.WaitForJobState(2, "succeeded", 20 * kSecond)) << cluster.Job(2).dump();
  EXPECT_FALSE(Contains(cluster.GetText("/metrics"),
                        "hangar_agent_messages_refused_total{reason=\"foreign_store\"} 1"));
}

}  // namespace
}  // namespace hangar::testing
