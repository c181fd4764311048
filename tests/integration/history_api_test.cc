// GET /v1/history end to end: a real controller with --auth tokens samples its cluster every
// second into its SQLite store; a viewer reads the points (a waiting job shows in the queue's
// series), a request without a token is refused, a bad range is a sentence, and the history
// survives a restart of the controller.
#include <gtest/gtest.h>
#include <httplib.h>
#include <signal.h>

#include <fstream>

#include "local_cluster.h"

namespace hangar::testing {
namespace {

constexpr const char* kCluster =
    "node_defaults: {gpus: 8, gpu_model: H100-SXM-80GB, gpu_memory: 80Gi, cpu: 64, memory: 512Gi}\n"
    "nodes: [{name: node-1}, {name: node-2}]\n";

struct Reply {
  int status = 0;
  nlohmann::json body;
};

class HistoryApiTest : public ::testing::Test {
 protected:
  void SetUp() override {
    cluster_ = std::make_unique<LocalCluster>(
        kCluster, std::vector<std::string>{"--auth", "tokens", "--history-interval", "1s",
                                           "--history-samples", "1h", "--history-hourly", "7d"});
    cluster_->StartController();
    std::ifstream in(cluster_->dir() + "/admin.token");
    std::getline(in, admin_);
    ASSERT_EQ(admin_.rfind("hgr_", 0), 0u);
    Reply v = Call(admin_, "POST", "/v1/tokens", R"({"user": "vic", "role": "viewer"})");
    ASSERT_EQ(v.status, 201) << v.body.dump();
    viewer_ = v.body["token"];
  }

  Reply Call(const std::string& token, const std::string& method, const std::string& path,
             const std::string& body = "") {
    httplib::Client c("127.0.0.1", cluster_->api_port());
    httplib::Headers h;
    if (!token.empty()) h.emplace("Authorization", "Bearer " + token);
    httplib::Result r =
        method == "GET" ? c.Get(path, h) : c.Post(path, h, body, "application/yaml");
    Reply out;
    if (!r) return out;
    out.status = r->status;
    out.body = nlohmann::json::parse(r->body, nullptr, false);
    return out;
  }

  std::unique_ptr<LocalCluster> cluster_;
  std::string admin_, viewer_;
};

TEST_F(HistoryApiTest, AViewerReadsTheSampledHistoryWhichOutlivesARestart) {
  // No agent: the job waits, and the samples count it pending on a cluster of 16 GPUs.
  ASSERT_EQ(
      Call(admin_, "POST", "/v1/jobs", "name: j\ntasks: [{gpus: 8, command: [sleep, '60']}]\n")
          .status,
      201);
  nlohmann::json seen;
  ASSERT_TRUE(LocalCluster::WaitFor(
      [&] {
        Reply r = Call(viewer_, "GET", "/v1/history?since=10m&step=1s");
        if (r.status != 200) return false;
        seen = r.body;
        int waiting = 0;
        for (const auto& p : r.body["points"]) waiting += p["pending"].get<double>() >= 1;
        return waiting >= 2;
      },
      20 * kSecond))
      << seen.dump();
  EXPECT_EQ(seen["step_ms"], 1000);
  EXPECT_EQ(seen["interval_ms"], 1000);
  EXPECT_EQ(seen["retention"]["samples_ms"], 3'600'000);
  EXPECT_EQ(seen["retention"]["hourly_ms"], 7 * 86'400'000LL);
  EXPECT_EQ(seen["until_ms"].get<int64_t>() - seen["since_ms"].get<int64_t>(), 600'000);
  const nlohmann::json& last = seen["points"].back();
  EXPECT_EQ(last["gpus"], 16);
  EXPECT_EQ(last["allocated"], 0);
  EXPECT_EQ(last["idle"], 0);
  EXPECT_EQ(last["running"], 0);
  const int64_t first = seen["points"][0]["time_ms"];

  Reply anonymous = Call("", "GET", "/v1/history");
  EXPECT_EQ(anonymous.status, 401) << anonymous.body.dump();
  Reply bad = Call(viewer_, "GET", "/v1/history?since=yesterday");
  EXPECT_EQ(bad.status, 400);
  EXPECT_EQ(bad.body["error"]["message"],
            "since must be a positive duration, like 6h, 24h or 7d (back from now)");
  Reply fine = Call(viewer_, "GET", "/v1/history?since=7d&step=1s");
  EXPECT_EQ(fine.status, 400) << "604,800 points";

  cluster_->KillController(SIGTERM);
  cluster_->StartController();
  Reply after = Call(viewer_, "GET", "/v1/history?since=10m&step=1s");
  ASSERT_EQ(after.status, 200) << after.body.dump();
  ASSERT_FALSE(after.body["points"].empty());
  EXPECT_EQ(after.body["points"][0]["time_ms"], first)
      << "the samples before the restart are kept in the store";
}

}  // namespace
}  // namespace hangar::testing
