#include "controller/request_guard.h"

#include <gtest/gtest.h>

namespace hangar::controller {
namespace {

constexpr const char* kToken =
    "hgr_dev_0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

httplib::Request Req(const std::string& method, const std::string& path,
                     httplib::Headers headers = {}) {
  httplib::Request r;
  r.method = method;
  r.path = path;
  r.headers = std::move(headers);
  return r;
}

RequestGuard Dev(int port = 8080) {
  RequestGuardOptions o;
  o.dev_token = kToken;
  o.dev_token_file = "/home/me/hangar-dev/dev-token";
  o.loopback_hosts = true;
  RequestGuard g(o);
  g.Bind(port);
  return g;
}

int StatusOf(const RequestGuard& g, const httplib::Request& r) {
  auto refused = g.Check(r);
  return refused ? refused->http_status : 0;
}

const httplib::Headers kJobPost = {{"Host", "127.0.0.1:8080"},
                                   {"Authorization", std::string("Bearer ") + kToken},
                                   {"Content-Type", "application/yaml"},
                                   {"Content-Length", "40"}};

// The page of another loopback address submitting a job with fetch(..., {mode: 'no-cors'}),
// as the attack did: refused, whatever else it sends.
TEST(RequestGuardTest, ACrossOriginBrowserPostIsRefusedInEveryMode) {
  const httplib::Headers attack = {{"Host", "127.0.0.1:8080"},
                                   {"Origin", "http://127.0.0.2:8080"},
                                   {"Content-Type", "text/plain;charset=UTF-8"},
                                   {"Content-Length", "40"}};
  RequestGuard open;  // --auth none, --auth tokens: no hosts configured
  open.Bind(8080);
  auto refused = open.Check(Req("POST", "/v1/jobs", attack));
  ASSERT_TRUE(refused);
  EXPECT_EQ(refused->http_status, 403);
  EXPECT_NE(refused->why.message().find("Origin 'http://127.0.0.2:8080'"), std::string::npos)
      << refused->why.message();
  EXPECT_EQ(StatusOf(Dev(), Req("POST", "/v1/jobs", attack)), 403);
  // Even with the token (a page cannot have it, but the check does not rest on that).
  httplib::Headers with_token = attack;
  with_token.emplace("Authorization", std::string("Bearer ") + kToken);
  EXPECT_EQ(StatusOf(Dev(), Req("POST", "/v1/jobs", with_token)), 403);
  EXPECT_EQ(StatusOf(open, Req("DELETE", "/v1/jobs/1", {{"Host", "a:1"}, {"Origin", "null"}})),
            403);
}

TEST(RequestGuardTest, TheApisOwnPagesAndProgramsWithoutOriginPass) {
  RequestGuard open;
  open.Bind(8080);
  httplib::Headers same = {{"Host", "ctl.example:8080"},
                           {"Origin", "https://ctl.example:8080"},
                           {"Content-Type", "application/json"},
                           {"Content-Length", "2"}};
  EXPECT_EQ(StatusOf(open, Req("POST", "/v1/jobs/1/cancel", same)), 0);
  EXPECT_EQ(StatusOf(open, Req("POST", "/v1/jobs",
                               {{"Content-Type", "application/json"}, {"Content-Length", "2"}})),
            0);
  // Reads from other origins are left to the browser's own rule (no CORS headers are sent).
  EXPECT_EQ(StatusOf(open, Req("GET", "/v1/jobs", {{"Origin", "http://evil.example"}})), 0);
  // In dev mode no other origin gets anything but the dashboard's page.
  EXPECT_EQ(StatusOf(Dev(), Req("GET", "/v1/jobs",
                                {{"Host", "127.0.0.1:8080"},
                                 {"Origin", "http://evil.example"},
                                 {"Authorization", std::string("Bearer ") + kToken}})),
            403);
  EXPECT_EQ(StatusOf(Dev(), Req("POST", "/v1/jobs", kJobPost)), 0);
  httplib::Headers dashboard = kJobPost;
  dashboard.emplace("Origin", "http://localhost:8080");
  EXPECT_EQ(StatusOf(Dev(), Req("POST", "/v1/jobs", dashboard)), 0);
}

TEST(RequestGuardTest, MutatingCallsTakeOnlyJsonOrYaml) {
  RequestGuard open;
  open.Bind(8080);
  for (const char* bad :
       {"text/plain", "text/plain;charset=UTF-8", "application/x-www-form-urlencoded",
        "multipart/form-data; boundary=x", "text/html", ""}) {
    SCOPED_TRACE(bad);
    auto refused =
        open.Check(Req("POST", "/v1/jobs", {{"Content-Type", bad}, {"Content-Length", "12"}}));
    ASSERT_TRUE(refused);
    EXPECT_EQ(refused->http_status, 415);
    EXPECT_NE(refused->why.message().find("application/yaml"), std::string::npos);
  }
  // A body with no type at all; chunked too.
  EXPECT_EQ(StatusOf(open, Req("POST", "/v1/jobs", {{"Content-Length", "12"}})), 415);
  EXPECT_EQ(StatusOf(open, Req("PUT", "/v1/x", {{"Transfer-Encoding", "chunked"}})), 415);
  // No body and no type (curl -X POST, `hangar cancel`'s DELETE): nothing to check.
  EXPECT_EQ(StatusOf(open, Req("POST", "/v1/jobs/1/cancel", {{"Content-Length", "0"}})), 0);
  EXPECT_EQ(StatusOf(open, Req("DELETE", "/v1/jobs/1")), 0);
  for (const char* good : {"application/json", "Application/JSON; charset=utf-8",
                           "application/yaml", "application/x-yaml", "text/yaml"}) {
    SCOPED_TRACE(good);
    EXPECT_EQ(
        StatusOf(open, Req("POST", "/v1/jobs", {{"Content-Type", good}, {"Content-Length", "12"}})),
        0);
  }
  // Reads are not checked: GET bodies are never read.
  EXPECT_EQ(StatusOf(open, Req("GET", "/v1/jobs", {{"Content-Type", "text/plain"}})), 0);
}

TEST(RequestGuardTest, DevModeTakesOnlyLoopbackNamesOfItsPort) {
  const RequestGuard g = Dev(8080);
  for (const char* ok : {"127.0.0.1:8080", "localhost:8080", "LOCALHOST:8080", "[::1]:8080"}) {
    httplib::Headers h = kJobPost;
    h.erase("Host");
    h.emplace("Host", ok);
    EXPECT_EQ(StatusOf(g, Req("POST", "/v1/jobs", h)), 0) << ok;
  }
  for (const char* bad :
       {"evil.example:8080", "127.0.0.1:9090", "127.0.0.1", "localhost", "127.0.0.2:8080"}) {
    httplib::Headers h = kJobPost;
    h.erase("Host");
    h.emplace("Host", bad);
    auto refused = g.Check(Req("POST", "/v1/jobs", h));
    ASSERT_TRUE(refused) << bad;
    EXPECT_EQ(refused->http_status, 421) << bad;
    EXPECT_NE(refused->why.message().find("127.0.0.1:8080, localhost:8080 or [::1]:8080"),
              std::string::npos)
        << refused->why.message();
  }
  // The page itself too: a rebound name gets nothing.
  EXPECT_EQ(StatusOf(g, Req("GET", "/", {{"Host", "evil.example:8080"}})), 421);
  EXPECT_EQ(StatusOf(g, Req("GET", "/")), 421);  // no Host at all
  httplib::Headers twice = kJobPost;
  twice.emplace("Host", "evil.example:8080");
  EXPECT_EQ(StatusOf(g, Req("POST", "/v1/jobs", twice)), 421);
}

TEST(RequestGuardTest, ConfiguredHostNamesAnswerWithOrWithoutThePort) {
  RequestGuardOptions o;
  o.hosts = {"ctl.example", "10.0.0.1:9000"};
  RequestGuard g(o);
  g.Bind(8080);
  EXPECT_EQ(StatusOf(g, Req("GET", "/v1/nodes", {{"Host", "ctl.example"}})), 0);
  EXPECT_EQ(StatusOf(g, Req("GET", "/v1/nodes", {{"Host", "ctl.example:8080"}})), 0);
  EXPECT_EQ(StatusOf(g, Req("GET", "/v1/nodes", {{"Host", "10.0.0.1:9000"}})), 0);
  EXPECT_EQ(StatusOf(g, Req("GET", "/v1/nodes", {{"Host", "10.0.0.1:8080"}})), 421);
  EXPECT_EQ(StatusOf(g, Req("GET", "/v1/nodes", {{"Host", "127.0.0.1:8080"}})), 421);
}

TEST(RequestGuardTest, DevModeWantsTheTokenForAllButThePageHealthAndMetrics) {
  const RequestGuard g = Dev();
  const httplib::Headers host = {{"Host", "127.0.0.1:8080"}};
  for (const char* open : {"/", "/ui/app.js", "/healthz", "/metrics"}) {
    EXPECT_EQ(StatusOf(g, Req("GET", open, host)), 0) << open;
  }
  for (const char* closed : {"/v1/jobs", "/v1/jobs/1/logs", "/v1/nodes", "/v1/audit",
                             "/v1/dashboard/feed", "/v1/whoami"}) {
    auto refused = g.Check(Req("GET", closed, host));
    ASSERT_TRUE(refused) << closed;
    EXPECT_EQ(refused->http_status, 401) << closed;
    EXPECT_NE(refused->why.message().find("cat /home/me/hangar-dev/dev-token"), std::string::npos)
        << refused->why.message();
  }
  httplib::Headers post = {
      {"Host", "127.0.0.1:8080"}, {"Content-Type", "application/yaml"}, {"Content-Length", "4"}};
  EXPECT_EQ(StatusOf(g, Req("POST", "/v1/jobs", post)), 401);
  EXPECT_EQ(StatusOf(g, Req("POST", "/healthz", post)), 401);  // open to reads only
  for (const std::string& wrong :
       {std::string("Bearer ") + kToken + "0", std::string("Bearer hgr_dev_0123"),
        std::string("Basic ") + kToken, std::string(kToken)}) {
    httplib::Headers h = post;
    h.emplace("Authorization", wrong);
    auto refused = g.Check(Req("POST", "/v1/jobs", h));
    ASSERT_TRUE(refused) << wrong;
    EXPECT_EQ(refused->http_status, 401);
    EXPECT_NE(refused->why.message().find("not this `hangar dev` cluster's token"),
              std::string::npos);
  }
  EXPECT_TRUE(g.HoldsDevToken(
      Req("GET", "/v1/jobs", {{"Authorization", std::string("bearer  ") + kToken}})));
  // Without a dev token (--auth none, --auth tokens) the guard wants none: Authorize does.
  RequestGuard open;
  open.Bind(8080);
  EXPECT_EQ(StatusOf(open, Req("GET", "/v1/jobs")), 0);
  EXPECT_FALSE(open.HoldsDevToken(
      Req("GET", "/v1/jobs", {{"Authorization", std::string("Bearer ") + kToken}})));
}

}  // namespace
}  // namespace hangar::controller
