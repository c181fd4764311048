// Issue 20, end to end: a real controller and agent on loopback, driven through the REST API and
// the `hangar` CLI as a user would: an array with a cap and its index variables, a dependency
// chain, bulk cancel by user, hold and release, requeue, pages that say what is left, unknown
// query parameters refused, and per-job accounting as JSON and CSV.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <filesystem>
#include <fstream>

#include "local_cluster.h"

namespace hangar::testing {
namespace {

namespace fs = std::filesystem;

constexpr const char* kCluster =
    "node_defaults: {gpus: 4, gpu_model: H100-SXM-80GB, gpu_memory: 80Gi, cpu: 32, memory: 256Gi}\n"
    "nodes: [{name: node-1}]\n";

std::pair<int, std::string> Shell(const std::string& command) {
  FILE* p = popen((command + " 2>&1").c_str(), "r");
  if (!p) return {-1, ""};
  std::string out;
  char buf[512];
  while (size_t n = fread(buf, 1, sizeof buf, p)) out.append(buf, n);
  const int status = pclose(p);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out};
}

class BatchTest : public ::testing::Test {
 protected:
  void SetUp() override {
    cluster_ = std::make_unique<LocalCluster>(kCluster);
    cluster_->StartController();
    cluster_->StartAgent("node-1");
    ASSERT_TRUE(cluster_->WaitForAgents(1));
    ASSERT_TRUE(LocalCluster::WaitFor(
        [&] { return cluster_->Get("/v1/nodes/node-1").value("state", "") == "ready"; },
        20 * kSecond));
  }
  std::string Cli(const std::string& args) {
    return std::string(HANGAR_BINARY) + " " + args +
           " --server http://127.0.0.1:" + std::to_string(cluster_->api_port());
  }
  std::string File(const std::string& name, const std::string& text) {
    const std::string path = cluster_->dir() + "/" + name;
    std::ofstream(path) << text;
    return path;
  }
  std::unique_ptr<LocalCluster> cluster_;
};

TEST_F(BatchTest, AnArrayWithACapRunsEveryElementWithItsIndex) {
  const std::string out = cluster_->dir() + "/out";
  fs::create_directories(out);
  // Each element notes its index, and how many elements run beside it while it does.
  const std::string job = File(
      "sweep.yaml", "name: sweep\ntasks: [{gpus: 1, command: ['/bin/sh', '-c', 'touch " + out +
                        "/run.$HANGAR_ARRAY_INDEX; ls " + out + " | grep -c run > " + out +
                        "/seen.$HANGAR_ARRAY_INDEX; sleep 0.5; echo $HANGAR_ARRAY_JOB_ID > " + out +
                        "/done.$HANGAR_ARRAY_INDEX; rm " + out + "/run.$HANGAR_ARRAY_INDEX']}]\n");
  auto [rc, said] = Shell(Cli("submit --array 0-5%2 " + job));
  ASSERT_EQ(rc, 0) << said;
  EXPECT_TRUE(Contains(said, "submitted array 1 (sweep): jobs 1-6, 6 elements, at most 2 running"))
      << said;
  ASSERT_TRUE(LocalCluster::WaitFor(
      [&] { return cluster_->Get("/v1/jobs?array=1&state=succeeded")["jobs"].size() == 6; },
      60 * kSecond))
      << cluster_->Get("/v1/jobs?array=1").dump();
  for (int i = 0; i < 6; ++i) {
    EXPECT_EQ(ReadFile(out + "/done." + std::to_string(i)), "1\n") << i;
    EXPECT_LE(std::stoi(ReadFile(out + "/seen." + std::to_string(i))), 2)
        << "element " << i << " ran beside more than the cap";
  }
  auto [lrc, listed] = Shell(Cli("jobs --array 1"));
  EXPECT_EQ(lrc, 0);
  EXPECT_TRUE(Contains(listed, "1[5]")) << listed;
}

TEST_F(BatchTest, ADependencyChainRunsInOrderAndAFailureEndsWhatNeededIt) {
  int status = 0;
  auto a = cluster_->Post(
      "/v1/jobs", "name: prep\ntasks: [{gpus: 1, command: ['/bin/sh', '-c', 'sleep 1; exit 3']}]\n",
      &status);
  ASSERT_EQ(status, 201) << a.dump();
  const uint64_t prep = a["id"];
  const std::string train =
      File("train.yaml", "name: train\ntasks: [{gpus: 1, command: [/bin/true]}]\n");
  auto [rc, said] = Shell(Cli("submit --after ok:" + std::to_string(prep) + " " + train));
  ASSERT_EQ(rc, 0) << said;
  auto c = cluster_->Post("/v1/jobs",
                          "name: alert\nafter: {notok: [" + std::to_string(prep) +
                              "]}\ntasks: [{gpus: 1, command: [/bin/true]}]\n",
                          &status);
  ASSERT_EQ(status, 201) << c.dump();
  const uint64_t train_id = prep + 1, alert = c["id"];
  ASSERT_TRUE(LocalCluster::WaitFor(
      [&] {
        return Contains(cluster_->Job(train_id).value("reason", ""), "to succeed (after.ok)");
      },
      10 * kSecond))
      << cluster_->Job(train_id).dump();
  ASSERT_TRUE(cluster_->WaitForJobState(prep, "failed", 20 * kSecond));
  ASSERT_TRUE(cluster_->WaitForJobState(train_id, "cancelled", 10 * kSecond))
      << cluster_->Job(train_id).dump();
  EXPECT_EQ(cluster_->Job(train_id).value("message", ""),
            "dependency can never be met: job " + std::to_string(prep) +
                " failed, so after.ok can never be met");
  EXPECT_TRUE(cluster_->WaitForJobState(alert, "succeeded", 20 * kSecond))
      << cluster_->Job(alert).dump();
  // A dependency on a job that does not exist is refused at once, by name.
  auto [brc, bad] = Shell(Cli("submit --after ok:999 " + train));
  EXPECT_EQ(brc, 1);
  EXPECT_TRUE(Contains(bad, "after.ok: job 999 does not exist")) << bad;
}

TEST_F(BatchTest, BulkCancelHoldReleaseAndRequeueAreOneRequestEach) {
  // Four GPUs: one 4-GPU job runs, the rest wait.
  const std::string big = "tasks: [{gpus: 4, command: ['/bin/sh', '-c', 'sleep 30']}]\n";
  int status = 0;
  auto running = cluster_->Post("/v1/jobs", "name: hog\n" + big, &status);
  ASSERT_EQ(status, 201);
  ASSERT_TRUE(cluster_->WaitForJobState(running["id"], "running", 20 * kSecond))
      << cluster_->Job(running["id"]).dump();
  for (const char* user : {"bob", "bob", "bob", "carol"}) {
    // As that user: with --auth none the X-Hangar-User header names the submitter.
    auto [crc, out] =
        Shell("curl -sf -X POST -H 'Content-Type: application/json' -H 'X-Hangar-User: " +
              std::string(user) +
              "' --data-binary '{\"name\": \"wait\", \"tasks\": [{\"gpus\": 4, \"command\": "
              "[\"sleep\", \"30\"]}]}' "
              "http://127.0.0.1:" +
              std::to_string(cluster_->api_port()) + "/v1/jobs");
    ASSERT_EQ(crc, 0) << out;
  }
  auto [rc, said] = Shell(Cli("cancel --user bob --state pending"));
  ASSERT_EQ(rc, 0) << said;
  EXPECT_TRUE(Contains(said, "cancel: 3 matched, 3 changed, 0 already so")) << said;
  auto [rc2, again] = Shell(Cli("cancel --user bob --state pending"));
  EXPECT_TRUE(Contains(again, "cancel: 0 matched")) << again;
  const uint64_t carol = cluster_->Get("/v1/jobs?user=carol")["jobs"][0]["id"];
  auto [hrc, held] = Shell(Cli("hold " + std::to_string(carol)));
  EXPECT_EQ(hrc, 0) << held;
  EXPECT_TRUE(Contains(cluster_->Job(carol).value("reason", ""), "held by anonymous"))
      << cluster_->Job(carol).dump();
  EXPECT_EQ(cluster_->Get("/v1/jobs?state=held")["jobs"].size(), 1u);
  // Requeue the running hog: its GPUs free up, but carol's job is held, so the hog comes back.
  auto [qrc, requeued] = Shell(Cli("requeue " + std::to_string(running["id"].get<uint64_t>())));
  EXPECT_EQ(qrc, 0) << requeued;
  ASSERT_TRUE(LocalCluster::WaitFor(
      [&] {
        return cluster_->Job(running["id"]).value("attempt", 0) == 1 &&
               cluster_->Job(running["id"]).value("state", "") == "running";
      },
      30 * kSecond))
      << cluster_->Job(running["id"]).dump();
  EXPECT_EQ(cluster_->Job(carol).value("state", ""), "pending");
  Shell(Cli("cancel " + std::to_string(running["id"].get<uint64_t>())));
  auto [rrc, released] = Shell(Cli("release " + std::to_string(carol)));
  EXPECT_EQ(rrc, 0) << released;
  EXPECT_TRUE(cluster_->WaitForJobState(carol, "running", 30 * kSecond))
      << cluster_->Job(carol).dump();
  // Holding a running job says why not.
  auto [xrc, refused] = Shell(Cli("hold " + std::to_string(carol)));
  EXPECT_EQ(xrc, 1);
  EXPECT_TRUE(Contains(refused, "only pending jobs can be held")) << refused;
}

TEST_F(BatchTest, ListsPageAndSayWhatIsLeftAndRefuseUnknownParameters) {
  int status = 0;
  cluster_->Post("/v1/jobs?count=30",
                 "name: many\ntasks: [{gpus: 4, command: ['/bin/sh', '-c', 'sleep 30']}]\n",
                 &status);
  ASSERT_EQ(status, 201);
  auto page = cluster_->Get("/v1/jobs?limit=10");
  ASSERT_EQ(page["jobs"].size(), 10u);
  EXPECT_EQ(page["more"], 20);
  auto next = cluster_->Get("/v1/jobs?limit=10&cursor=" + page["next_cursor"].get<std::string>());
  EXPECT_EQ(next["jobs"][0]["id"], 20);
  auto [rc, said] = Shell(Cli("jobs --limit 5"));
  EXPECT_EQ(rc, 0);
  EXPECT_TRUE(Contains(said, "25 more: `hangar jobs --cursor 26` for the next page, or --all"))
      << said;
  auto [arc, all] = Shell(Cli("jobs --all --limit 7 -o json"));
  EXPECT_EQ(nlohmann::json::parse(all)["jobs"].size(), 30u);
  auto bad = cluster_->Get("/v1/jobs?quue=default", &status);
  EXPECT_EQ(status, 400);
  EXPECT_TRUE(Contains(bad.dump(), "unknown query parameter 'quue'")) << bad.dump();
  cluster_->Get("/v1/jobs?state=finished", &status);
  EXPECT_EQ(status, 400);
}

TEST_F(BatchTest, HistoryAccountsForEachJob) {
  int status = 0;
  auto r = cluster_->Post("/v1/jobs",
                          "name: acct\ntasks: [{gpus: 2, command: ['/bin/sh', '-c', 'sleep 1']}]\n",
                          &status);
  ASSERT_EQ(status, 201);
  const uint64_t id = r["id"];
  ASSERT_TRUE(cluster_->WaitForJobState(id, "succeeded", 20 * kSecond));
  auto rows = cluster_->Get("/v1/accounting/jobs?name=acct")["jobs"];
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0]["attempts"], 1);
  EXPECT_EQ(rows[0]["gpu_model"], "H100-SXM-80GB");
  EXPECT_GT(rows[0]["gpu_hours"].get<double>(), 0.0);
  const std::string csv = cluster_->GetText("/v1/accounting/jobs?format=csv");
  EXPECT_TRUE(Contains(csv, "id,name,array_id,array_index,user,queue,tier,gpus,gpu_model")) << csv;
  auto [rc, said] = Shell(Cli("history --csv"));
  EXPECT_EQ(rc, 0);
  EXPECT_TRUE(Contains(
      said, std::to_string(id) + ",acct,0,-1,anonymous,default,guaranteed,2,H100-SXM-80GB"))
      << said;
  auto [orc, same] =
      Shell(Cli("history -o csv"));  // where other commands take -o, a user tries it first
  EXPECT_EQ(orc, 0);
  EXPECT_EQ(same, said);
  auto [trc, table] = Shell(Cli("history"));
  EXPECT_TRUE(Contains(table, "succeeded")) << table;
}

}  // namespace
}  // namespace hangar::testing
