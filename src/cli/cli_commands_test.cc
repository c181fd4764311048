// The user commands against a fake API server on loopback: what they ask for and what they print.
#include "cli/cli_commands.h"

#include <gtest/gtest.h>
#include <httplib.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>
#include <vector>

#include "cli/fake_api.h"

namespace hangar::cli {
namespace {

using testing::FakeApi;
using testing::RunCli;

TEST(CliCommandsTest, LogsAsksForTaskZeroAndEventsForFifty) {
  FakeApi api;
  api.server().Get(R"(/v1/jobs/1/logs)", [&](const httplib::Request& req, httplib::Response& res) {
    api.Record(req);
    res.set_content("hello\n", "text/plain");
  });
  api.server().Get("/v1/events", [&](const httplib::Request& req, httplib::Response& res) {
    api.Record(req);
    res.set_content(R"({"events": []})", "application/json");
  });
  ::testing::internal::CaptureStdout();
  EXPECT_EQ(RunCli(api, {"logs", "1"}), 0);
  EXPECT_EQ(RunCli(api, {"events"}), 0);
  EXPECT_EQ(RunCli(api, {"logs", "1", "--task", "2"}), 0);
  EXPECT_EQ(RunCli(api, {"events", "--limit", "7"}), 0);
  const std::string out = ::testing::internal::GetCapturedStdout();
  EXPECT_NE(out.find("hello"), std::string::npos);
  EXPECT_EQ(api.requests(),
            (std::vector<std::string>{"/v1/jobs/1/logs?task=0", "/v1/events?limit=50",
                                      "/v1/jobs/1/logs?task=2", "/v1/events?limit=7"}));
}

TEST(CliCommandsTest, LogsFollowWaitsForAPendingJobToStart) {
  FakeApi api;
  std::atomic<int> polls{0};
  api.server().Get(R"(/v1/jobs/3)", [&](const httplib::Request&, httplib::Response& res) {
    nlohmann::json j = {{"id", 3},
                        {"name", "train"},
                        {"state", "pending"},
                        {"tasks", 1},
                        {"reason", "waiting for 8 GPUs"}};
    if (++polls >= 3) {
      j["state"] = "running";
      j["task_list"] = {{{"index", 0}, {"node", "node-1"}, {"state", "running"}}};
    }
    res.set_content(j.dump(), "application/json");
  });
  api.server().Get(R"(/v1/jobs/3/logs)", [&](const httplib::Request& req, httplib::Response& res) {
    api.Record(req);
    res.set_content("step 1\n", "text/plain");
  });
  ::testing::internal::CaptureStdout();
  ::testing::internal::CaptureStderr();
  EXPECT_EQ(RunCli(api, {"logs", "-f", "3"}), 0);
  const std::string err = ::testing::internal::GetCapturedStderr();
  const std::string out = ::testing::internal::GetCapturedStdout();
  EXPECT_EQ(out, "step 1\n");
  EXPECT_GE(polls.load(), 3);
  EXPECT_EQ(api.requests(), (std::vector<std::string>{"/v1/jobs/3/logs?follow=1&task=0"}));
  // One note, not one per poll.
  EXPECT_EQ(err,
            "job 3 is pending: waiting for 8 GPUs; waiting for it to start (Ctrl-C to stop)\n");
}

TEST(CliCommandsTest, LogsFollowOfAJobThatEndedUnstartedSaysSo) {
  FakeApi api;
  api.server().Get(R"(/v1/jobs/4)", [&](const httplib::Request&, httplib::Response& res) {
    res.set_content(R"({"id": 4, "state": "cancelled", "tasks": 2})", "application/json");
  });
  ::testing::internal::CaptureStderr();
  EXPECT_EQ(RunCli(api, {"logs", "-f", "4"}), 1);
  EXPECT_EQ(::testing::internal::GetCapturedStderr(),
            "error: job 4 ended (cancelled) before task 0 started; it has no logs\n");
}

TEST(CliCommandsTest, LogsOfAPendingJobSayHowToWait) {
  FakeApi api;
  api.server().Get(R"(/v1/jobs/5/logs)", [&](const httplib::Request&, httplib::Response& res) {
    res.status = 400;
    res.set_content(
        R"({"error": {"code": "FAILED_PRECONDITION", "message": "job 5 has not started; it has no logs yet"}})",
        "application/json");
  });
  ::testing::internal::CaptureStderr();
  EXPECT_EQ(RunCli(api, {"logs", "5"}), 1);
  EXPECT_EQ(::testing::internal::GetCapturedStderr(),
            "error: job 5 has not started; it has no logs yet; `hangar logs -f 5` waits for it to "
            "start\n");
}

TEST(CliCommandsTest, AJobIdThatIsNotANumberIsRefusedBeforeAnyRequest) {
  FakeApi api;
  api.server().set_logger(
      [&](const httplib::Request& req, const httplib::Response&) { api.Record(req); });
  for (const char* cmd : {"cancel", "job", "logs"}) {
    ::testing::internal::CaptureStderr();
    EXPECT_EQ(RunCli(api, {cmd, "llm-serve"}), 1) << cmd;
    EXPECT_EQ(
        ::testing::internal::GetCapturedStderr(),
        "error: job ids are numbers; 'llm-serve' is not one - find the id with `hangar jobs`\n")
        << cmd;
  }
  EXPECT_TRUE(api.requests().empty());
  EXPECT_TRUE(CheckJobId("42").ok());
  EXPECT_FALSE(CheckJobId("").ok());
  EXPECT_FALSE(CheckJobId("-1").ok());
}

TEST(CliCommandsTest, ExplainTakesAServicesNameOrAReplicasJobAndSaysWhyItHasItsReplicas) {
  FakeApi api;
  const std::string service =
      R"({"name": "web", "desired": 2, "ready": 1, "why": "its file asks for 2 replicas",
          "revision": 1, "rollout": "complete", "message": "", "guaranteed": 2,
          "opportunistic": 0, "waiting": [{"replica": 2, "job": 8, "state": "pending",
          "why": "its job is pending: no room"}]})";
  api.server().Get("/v1/services/web/explain",
                   [&](const httplib::Request& req, httplib::Response& res) {
                     api.Record(req);
                     res.set_content(service, "application/json");
                   });
  api.server().Get("/v1/jobs/8/explain", [&](const httplib::Request& req, httplib::Response& res) {
    api.Record(req);
    res.set_content(R"({"id": 8, "name": "web-2", "state": "pending", "reason": "no room",
                        "rule": "none", "service": "web"})",
                    "application/json");
  });
  ::testing::internal::CaptureStdout();
  EXPECT_EQ(RunCli(api, {"explain", "web"}), 0);
  EXPECT_EQ(RunCli(api, {"explain", "8"}), 0);
  const std::string out = ::testing::internal::GetCapturedStdout();
  EXPECT_EQ(api.requests(),
            (std::vector<std::string>{"/v1/services/web/explain", "/v1/jobs/8/explain",
                                      "/v1/services/web/explain"}));
  EXPECT_NE(out.find("service web wants 2 replicas, 1 ready: its file asks for 2 replicas\n"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("  replica 2 (job 8) is pending: its job is pending: no room\n"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("job 8 (web-2) is pending: no room\n"), std::string::npos) << out;
}

TEST(CliCommandsTest, ExplainNamesTheNodeAGangReplacedAndTheSpareItTook) {
  FakeApi api;
  api.server().Get("/v1/jobs/5/explain", [&](const httplib::Request& req, httplib::Response& res) {
    api.Record(req);
    res.set_content(R"({"id": 5, "name": "gang", "state": "running", "reason": "", "rule": "none",
                        "replaced": {"waiting": false, "replacements": [{"attempt": 1,
                        "at_ms": 0, "failed": "node-2", "with": "node-4", "spare": true,
                        "why": "node node-2 draining: Xid 79"}]}})",
                    "application/json");
  });
  ::testing::internal::CaptureStdout();
  EXPECT_EQ(RunCli(api, {"explain", "5"}), 0);
  const std::string out = ::testing::internal::GetCapturedStdout();
  EXPECT_NE(out.find("  attempt 1: node node-2 replaced by spare node-4 at 1970-01-01T00:00:00Z "
                     "(node node-2 draining: Xid 79)\n"),
            std::string::npos)
      << out;
}

// A gang holding its healthy nodes for a replacement (on_node_failure.wait_for_node): explain says
// which, until when and for which failed node (docs/goodput.md's example).
TEST(CliCommandsTest, ExplainSaysAGangHoldsItsHealthyNodes) {
  FakeApi api;
  api.server().Get("/v1/jobs/1/explain", [&](const httplib::Request& req, httplib::Response& res) {
    api.Record(req);
    res.set_content(R"({"id": 1, "name": "gang", "state": "pending", "rule": "none",
                        "reason": "holding its healthy nodes until 2026-12-07T03:10:00Z for a node to replace node-2 (on_node_failure.wait_for_node); then it restarts there, or is placed whole",
                        "replaced": {"waiting": false, "replacements": [],
                        "holding": {"failed": "node-2", "since_ms": 1796612400000,
                        "until_ms": 1796613000000, "nodes": ["node-1"], "why": "lost"}}})",
                    "application/json");
  });
  ::testing::internal::CaptureStdout();
  EXPECT_EQ(RunCli(api, {"explain", "1"}), 0);
  const std::string out = ::testing::internal::GetCapturedStdout();
  EXPECT_NE(out.find("  holds its healthy nodes (node-1) until 2026-12-07T03:10:00Z for a node to "
                     "replace node-2 (on_node_failure.wait_for_node); then it restarts there, or "
                     "is placed whole\n"),
            std::string::npos)
      << out;
}

}  // namespace
}  // namespace hangar::cli
