// The sharing commands against a fake API server on loopback: what `hangar apply`, `hangar queues`
// and `hangar share` print.
#include <gtest/gtest.h>
#include <httplib.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <thread>

#include "api/views.h"
#include "cli/cli_commands.h"
#include "cli/fake_api.h"
#include "job/queue_spec.h"

namespace hangar::cli {
namespace {

using testing::FakeApi;
using testing::RunCli;

constexpr const char* kQueues = R"(queues:
  - name: research
    borrowing_limit: {gpus: 0}
    children:
      - name: vision
        quota: {gpus: 16, cpu: 256, memory: 2Ti}
        lending_limit: {gpus: 8}
        idle: {gpu_util_below: 5, for: 30m, action: checkpoint-requeue}
      - name: nlp
        quota: {gpus: {H100-SXM-80GB: 8}}
)";

TEST(ShareCommandsTest, QueuesPrintPeoplesUnits) {
  FakeApi api;
  auto specs = job::ParseQueues(kQueues, "q.yaml");
  ASSERT_TRUE(specs.ok());
  const std::string body = job::QueuesToJson(*specs).dump();  // what GET /v1/queues answers
  api.server().Get("/v1/queues", [&](const httplib::Request&, httplib::Response& res) {
    res.set_content(body, "application/json");
  });
  ::testing::internal::CaptureStdout();
  EXPECT_EQ(RunCli(api, {"queues"}), 0);
  const std::string out = ::testing::internal::GetCapturedStdout();
  EXPECT_NE(out.find("16 GPUs, 256 cores, 2Ti memory"), std::string::npos) << out;
  EXPECT_NE(out.find("8 H100-SXM-80GB"), std::string::npos) << out;
  EXPECT_NE(out.find("0 GPUs"), std::string::npos) << out;
  EXPECT_NE(out.find("<5% for 30m: checkpoint-requeue"), std::string::npos) << out;
  EXPECT_EQ(out.find("000m"), std::string::npos) << out;
  EXPECT_EQ(out.find("Mi"), std::string::npos) << out;
}

TEST(ShareCommandsTest, ShareShowsPerModelGuarantees) {
  FakeApi api;
  api.server().Get("/v1/share", [&](const httplib::Request&, httplib::Response& res) {
    // As the controller answers: guarantee_gpus counts the per-model guarantees too.
    nlohmann::json share = {{"half_life_s", 1800},
                            {"queues",
                             {{{"name", "research"},
                               {"depth", 0},
                               {"guarantee_gpus", 24.0},
                               {"guarantee_by_model", {{"H100-SXM-80GB", 8.0}}}},
                              {{"name", "vision"}, {"depth", 1}, {"guarantee_gpus", 16.0}},
                              {{"name", "nlp"},
                               {"depth", 1},
                               {"guarantee_gpus", 8.0},
                               {"guarantee_by_model", {{"H100-SXM-80GB", 8.0}}}},
                              {{"name", "default"}, {"depth", 0}, {"guarantee_gpus", 0.0}}}}};
    res.set_content(share.dump(), "application/json");
  });
  ::testing::internal::CaptureStdout();
  EXPECT_EQ(RunCli(api, {"share"}), 0);
  const std::string out = ::testing::internal::GetCapturedStdout();
  EXPECT_NE(out.find("research  1       16 + 8 H100-SXM-80GB"), std::string::npos) << out;
  EXPECT_NE(out.find("  nlp     1       8 H100-SXM-80GB"), std::string::npos) << out;
  EXPECT_NE(out.find("default   1       0 "), std::string::npos) << out;
}

TEST(ShareCommandsTest, ApplyWarnsWhenItRemovesAQueue) {
  FakeApi api;
  api.server().Post("/v1/queues", [&](const httplib::Request&, httplib::Response& res) {
    res.set_content(
        R"({"created": ["research", "vision", "nlp"], "changed": [], "unchanged": [], "removed": ["default"]})",
        "application/json");
  });
  const std::string file = ::testing::TempDir() + "share_commands_test_queues.yaml";
  std::ofstream(file) << kQueues;
  ::testing::internal::CaptureStdout();
  ::testing::internal::CaptureStderr();
  EXPECT_EQ(RunCli(api, {"apply", "-f", file}), 0);
  const std::string out = ::testing::internal::GetCapturedStdout();
  const std::string err = ::testing::internal::GetCapturedStderr();
  std::remove(file.c_str());
  EXPECT_NE(out.find("removed default"), std::string::npos) << out;
  EXPECT_NE(err.find("warning: queue 'default' was not in " + file +
                     " and is removed: jobs that name it are refused from now on (the shipped "
                     "examples and jobs "
                     "without 'queue:' use it); to keep it, add `- name: default` to the file"),
            std::string::npos)
      << err;
}

TEST(ShareCommandsTest, EventsTakeTheSubjectAsAnArgument) {
  FakeApi api;
  std::string asked;
  api.server().Get("/v1/events", [&](const httplib::Request& req, httplib::Response& res) {
    asked = req.get_param_value("subject");
    res.set_content(R"({"events": []})", "application/json");
  });
  ::testing::internal::CaptureStdout();
  EXPECT_EQ(RunCli(api, {"events", "job/7"}), 0);  // what a user may read: their own job's events
  ::testing::internal::GetCapturedStdout();
  EXPECT_EQ(asked, "job/7");
}

TEST(ShareCommandsTest, NodesNoAgentServesShowNothingFree) {
  FakeApi api;
  api.server().Get("/v1/nodes", [&](const httplib::Request&, httplib::Response& res) {
    api::NodeView ready, unknown;
    ready.name = "node-1";
    ready.state = "ready";
    ready.gpus = 8;
    ready.gpus_free = 8;
    unknown = ready;
    unknown.name = "node-2";
    unknown.state = "unknown";
    unknown.reason = "no agent has connected yet: start `hangar agent` on it";
    res.set_content(nlohmann::json{{"nodes", {api::ToJson(ready), api::ToJson(unknown)}}}.dump(),
                    "application/json");
  });
  ::testing::internal::CaptureStdout();
  EXPECT_EQ(RunCli(api, {"nodes"}), 0);
  const std::string out = ::testing::internal::GetCapturedStdout();
  EXPECT_NE(out.find("node-1  ready    "), std::string::npos) << out;
  const std::string row = out.substr(out.find("node-2"));
  EXPECT_NE(row.find("8     -     -"), std::string::npos) << out;
  EXPECT_NE(row.find("no agent has connected yet"), std::string::npos) << out;
}

// Issue 16: a token maps to the Unix account its jobs run as; `token list` shows it.
TEST(ShareCommandsTest, TokensSayWhoTheirTasksRunAs) {
  FakeApi api;
  std::vector<nlohmann::json> bodies;
  api.server().Post("/v1/tokens", [&](const httplib::Request& req, httplib::Response& res) {
    bodies.push_back(nlohmann::json::parse(req.body));
    nlohmann::json out = bodies.back();
    out["id"] = "3f2a9c01d4e7";
    out["token"] = "hgr_3f2a9c01d4e7_secret";
    if (out.contains("uid"))
      out["run_as"] = {
          {"uid", out["uid"]}, {"gid", out.value("gid", out["uid"])}, {"groups", out["groups"]}};
    res.status = 201;
    res.set_content(out.dump(), "application/json");
  });
  api.server().Get("/v1/tokens", [&](const httplib::Request&, httplib::Response& res) {
    res.set_content(R"({"tokens": [
      {"id": "a1", "user": "alice", "role": "user", "created_ms": 0, "run_as": {"uid": 61001, "gid": 61001, "groups": [61010, 61011]}},
      {"id": "b2", "user": "bob", "role": "user", "created_ms": 0},
      {"id": "c3", "user": "svc", "role": "user", "created_ms": 0, "run_as": {"account": "train"}},
      {"id": "d4", "user": "node:gpu-001", "role": "node", "node": "gpu-001", "created_ms": 0}]})",
                    "application/json");
  });
  ::testing::internal::CaptureStdout();
  ::testing::internal::CaptureStderr();
  EXPECT_EQ(RunCli(api, {"token", "create", "--user", "alice", "--role", "user", "--uid", "61001",
                         "--groups", "61010,61011"}),
            0);
  EXPECT_EQ(
      RunCli(api, {"token", "create", "--user", "svc", "--role", "user", "--account", "train"}), 0);
  EXPECT_EQ(RunCli(api, {"token", "create", "--user", "carol", "--role", "user", "--uid", "5",
                         "--groups", "1,x"}),
            1);
  ::testing::internal::GetCapturedStdout();
  const std::string err = ::testing::internal::GetCapturedStderr();
  ASSERT_EQ(bodies.size(), 2u);
  EXPECT_EQ(bodies[0].dump(),
            R"({"groups":[61010,61011],"role":"user","uid":61001,"user":"alice"})");
  EXPECT_EQ(bodies[1].dump(), R"({"account":"train","role":"user","user":"svc"})");
  EXPECT_NE(err.find("token 3f2a9c01d4e7 for alice (user), tasks run as uid 61001 gid 61001 groups "
                     "61010,61011"),
            std::string::npos)
      << err;
  EXPECT_NE(err.find("'x' is not a group id"), std::string::npos) << err;

  ::testing::internal::CaptureStdout();
  EXPECT_EQ(RunCli(api, {"token", "list"}), 0);
  const std::string out = ::testing::internal::GetCapturedStdout();
  EXPECT_NE(out.find("RUNS AS"), std::string::npos) << out;
  EXPECT_NE(out.find("uid 61001 gid 61001 groups 61010,61011"), std::string::npos) << out;
  EXPECT_NE(out.find("b2  bob           user  -        bob "), std::string::npos)
      << out;  // named like the user
  EXPECT_NE(out.find("c3  svc           user  -        train "), std::string::npos) << out;
  EXPECT_NE(out.find("gpu-001  -  "), std::string::npos) << out;  // node tokens run nothing
}

}  // namespace
}  // namespace hangar::cli
