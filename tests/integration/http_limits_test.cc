// Issue 16, "limits against hostile clients": idle connections, log followers and slow headers
// do not keep the REST API from answering anyone else; connections over a cap are refused at
// once with a sentence; one user's queue is capped (429). Real controllers on loopback, spoken
// to with raw sockets from addresses of 127.0.0.0/8 of their own (each is a client of its own to
// the per-client cap). Nothing here depends on timing but generous bounds (answers within 5 s).
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <thread>

#include "local_cluster.h"

namespace hangar::testing {
namespace {

constexpr const char* kCluster =
    "node_defaults: {gpus: 8, gpu_model: H100-SXM-80GB, gpu_memory: 80Gi, cpu: 64, memory: 512Gi}\n"
    "nodes: [{name: node-1}]\n";

// A connected socket from `src` to 127.0.0.1:port (-1 when it cannot connect).
int Connect(const std::string& src, int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in from{};
  from.sin_family = AF_INET;
  inet_pton(AF_INET, src.c_str(), &from.sin_addr);
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_port = htons(static_cast<uint16_t>(port));
  to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&from), sizeof from) != 0 ||
      ::connect(fd, reinterpret_cast<sockaddr*>(&to), sizeof to) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

bool Send(int fd, const std::string& s) {
  return ::send(fd, s.data(), s.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(s.size());
}

// What arrives on `fd` within `ms`, until `enough` holds or the peer closes (*closed).
std::string Read(int fd, int ms, const std::function<bool(const std::string&)>& enough,
                 bool* closed = nullptr) {
  std::string got;
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
  if (closed) *closed = false;
  while (!enough(got)) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        until - std::chrono::steady_clock::now());
    if (left.count() <= 0) break;
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(left.count())) <= 0) break;
    char buf[4096];
    const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n <= 0) {
      if (closed) *closed = true;
      break;
    }
    got.append(buf, static_cast<size_t>(n));
  }
  return got;
}

// GET /healthz from 127.0.0.1 on a fresh connection, 5 s to answer: the status (0: none).
int Healthz(int port) {
  httplib::Client c("127.0.0.1", port);
  c.set_connection_timeout(5, 0);
  c.set_read_timeout(5, 0);
  auto r = c.Get("/healthz");
  return r ? r->status : 0;
}

// The value of one /metrics series (-1 when absent).
double Metric(LocalCluster& c, const std::string& series) {
  std::string text = c.GetText("/metrics?gpus=0&nodes=0");
  const size_t at = text.find("\n" + series + " ");
  return at == std::string::npos ? -1 : std::atof(text.c_str() + at + series.size() + 2);
}

void CloseAll(std::vector<int>& fds) {
  for (int fd : fds) {
    if (fd >= 0) ::close(fd);
  }
  fds.clear();
}

TEST(HttpLimitsTest, ConnectionsOverTheClientCapAreRefusedAndOthersAreServed) {
  LocalCluster c(kCluster, {"--http-max-connections-per-client", "8"});
  c.StartController();
  std::vector<int> fds;
  for (int i = 0; i < 20; ++i) {
    fds.push_back(Connect("127.0.0.2", c.api_port()));
    ASSERT_GE(fds.back(), 0);
  }
  // The eight first are held (they say nothing, and hear nothing); the twelve others are told why.
  int refused = 0, silent = 0;
  for (int fd : fds) {
    bool closed = false;
    const std::string got = Read(
        fd, refused + silent < 8 ? 300 : 5000, [](const std::string&) { return false; }, &closed);
    if (got.empty() && !closed) {
      ++silent;
      continue;
    }
    ++refused;
    EXPECT_TRUE(Contains(got, "HTTP/1.1 503")) << got;
    EXPECT_TRUE(Contains(got, "127.0.0.2 already holds 8 connections")) << got;
    EXPECT_TRUE(Contains(got, "--http-max-connections-per-client")) << got;
  }
  EXPECT_EQ(silent, 8);
  EXPECT_EQ(refused, 12);
  // Another client is served, and so is a held connection once it asks.
  EXPECT_EQ(Healthz(c.api_port()), 200);
  ASSERT_TRUE(Send(fds[0], "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"));
  EXPECT_TRUE(
      Contains(Read(fds[0], 5000, [](const std::string& s) { return Contains(s, "\"ok\""); }),
               "HTTP/1.1 200"));
  EXPECT_GE(
      Metric(c, "hangar_http_connections_refused_total{reason=\"max_connections_per_client\"}"),
      12);
  EXPECT_GE(Metric(c, "hangar_http_connections_open"), 8);
  CloseAll(fds);
}

TEST(HttpLimitsTest, ConnectionsOverTheTotalCapAreRefusedWithASentence) {
  LocalCluster c(kCluster, {"--http-max-connections", "16"});
  c.StartController();
  std::vector<int> fds;
  for (int i = 0; i < 16; ++i) fds.push_back(Connect("127.0.0.2", c.api_port()));
  // Held: the 16th is answered when it asks, so all 16 are in.
  ASSERT_TRUE(Send(fds[15], "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"));
  ASSERT_TRUE(
      Contains(Read(fds[15], 5000, [](const std::string& s) { return Contains(s, "\"ok\""); }),
               "HTTP/1.1 200"));
  const int over = Connect("127.0.0.3", c.api_port());
  const std::string got = Read(over, 5000, [](const std::string&) { return false; });
  EXPECT_TRUE(Contains(got, "HTTP/1.1 503")) << got;
  EXPECT_TRUE(Contains(got, "already holds 16 connections, its cap (--http-max-connections)"))
      << got;
  ::close(over);
  CloseAll(fds);
  // Closed connections free their places.
  EXPECT_TRUE(LocalCluster::WaitFor([&] { return Healthz(c.api_port()) == 200; }, 5 * kSecond));
  EXPECT_GE(Metric(c, "hangar_http_connections_refused_total{reason=\"max_connections\"}"), 1);
}

TEST(HttpLimitsTest, LogFollowersAndIdleConnectionsLeaveHealthzAnswering) {
  LocalCluster c(kCluster);
  c.StartController();
  c.StartAgent("node-1", {"--stop-tasks-on-exit"});
  ASSERT_TRUE(c.WaitForAgents(1));
  int status = 0;
  auto job = c.Post("/v1/jobs",
                    R"({"name": "chatter", "tasks": [{"gpus": 1, "command": ["/bin/sh", "-c",
                        "while true; do echo chatter line; sleep 0.1; done"]}]})",
                    &status);
  ASSERT_EQ(status, 201) << job.dump();
  const uint64_t id = job["id"];
  ASSERT_TRUE(c.WaitForJobState(id, "running", 20 * kSecond));
  // 20 followers of its log (more than cpp-httplib's 8 workers), each receiving lines.
  std::vector<int> followers, idle;
  for (int i = 0; i < 20; ++i) {
    followers.push_back(Connect("127.0.0.1", c.api_port()));
    ASSERT_TRUE(Send(followers.back(), "GET /v1/jobs/" + std::to_string(id) +
                                           "/logs?follow=1 HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"));
  }
  for (int fd : followers) {
    const std::string got =
        Read(fd, 10000, [](const std::string& s) { return Contains(s, "chatter line"); });
    EXPECT_TRUE(Contains(got, "HTTP/1.1 200")) << got;
    EXPECT_TRUE(Contains(got, "chatter line")) << got;
  }
  // And 100 connections that say nothing.
  for (int i = 0; i < 100; ++i) {
    idle.push_back(Connect("127.0.0.1", c.api_port()));
    ASSERT_GE(idle.back(), 0);
  }
  for (int i = 0; i < 5; ++i) EXPECT_EQ(Healthz(c.api_port()), 200);
  EXPECT_EQ(c.Get("/v1/jobs", &status)["jobs"].size(), 1u);
  EXPECT_EQ(status, 200);
  // The followers still stream.
  for (int fd : followers) {
    EXPECT_TRUE(
        Contains(Read(fd, 5000, [](const std::string& s) { return Contains(s, "chatter line"); }),
                 "chatter line"));
  }
  EXPECT_GE(Metric(c, "hangar_http_streams_open"), 20);  // streamed by the pump, not by workers
  CloseAll(followers);
  CloseAll(idle);
  c.Post("/v1/jobs/" + std::to_string(id) + "/cancel", "");
}

TEST(HttpLimitsTest, SlowHeadersAreCutAtTheHeaderTimeout) {
  LocalCluster c(kCluster, {"--http-header-timeout", "1s"});
  c.StartController();
  const int fd = Connect("127.0.0.2", c.api_port());
  const std::string head =
      "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: "
      "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
  bool closed = false;
  const auto t0 = std::chrono::steady_clock::now();
  // A byte every 200 ms: each read makes progress, so only a deadline on the whole header stops it.
  for (size_t i = 0; i < head.size() && !closed; ++i) {
    if (!Send(fd, head.substr(i, 1))) closed = true;
    if (!closed)
      Read(
          fd, 200, [](const std::string&) { return false; }, &closed);
  }
  const double held = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_TRUE(closed) << "the server still reads a header that has trickled in for " << held
                      << " s";
  EXPECT_LT(held, 8.0);
  ::close(fd);
  EXPECT_EQ(Healthz(c.api_port()), 200);
  EXPECT_GE(Metric(c, "hangar_http_connections_cut_total{reason=\"header_timeout\"}"), 1);
  // Headers past 64 KiB are cut too.
  const int big = Connect("127.0.0.2", c.api_port());
  std::string huge = "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n";
  while (huge.size() < 100 * 1024) huge += "X-Pad: " + std::string(100, 'p') + "\r\n";
  Send(big, huge);
  Read(
      big, 5000, [](const std::string&) { return false; }, &closed);
  EXPECT_TRUE(closed);
  ::close(big);
}

TEST(HttpLimitsTest, KeepAliveAndPipelinedRequestsAreServed) {
  LocalCluster c(kCluster);
  c.StartController();
  httplib::Client client("127.0.0.1", c.api_port());
  client.set_keep_alive(true);
  client.set_read_timeout(5, 0);
  for (int i = 0; i < 50; ++i) {
    auto r = client.Get("/healthz");
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 200);
  }
  // Two requests in one write: both answered, in order, on the one connection.
  const int fd = Connect("127.0.0.1", c.api_port());
  ASSERT_TRUE(Send(fd,
                   "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\nGET /v1/nope HTTP/1.1\r\nHost: "
                   "127.0.0.1\r\n\r\n"));
  const std::string got =
      Read(fd, 5000, [](const std::string& s) { return Contains(s, "HTTP/1.1 404"); });
  EXPECT_TRUE(Contains(got, "HTTP/1.1 200")) << got;
  EXPECT_TRUE(Contains(got, "HTTP/1.1 404")) << got;
  EXPECT_LT(got.find("HTTP/1.1 200"), got.find("HTTP/1.1 404"));
  ::close(fd);
}

TEST(HttpLimitsTest, QueuedJobsPerUserAreCappedWith429) {
  LocalCluster c(kCluster, {"--max-queued-per-user", "5"});
  c.StartController();  // no agent: every job stays pending
  httplib::Client client("127.0.0.1", c.api_port());
  client.set_read_timeout(10, 0);
  const std::string spec = R"({"name": "q", "tasks": [{"gpus": 1, "command": ["true"]}]})";
  auto submit = [&](const std::string& user, const std::string& query) {
    return client.Post("/v1/jobs" + query, httplib::Headers{{"X-Hangar-User", user}}, spec,
                       "application/json");
  };
  auto r = submit("alice", "?count=5");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 201) << r->body;
  r = submit("alice", "");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 429);
  const std::string message = nlohmann::json::parse(r->body)["error"].value("message", "");
  EXPECT_TRUE(Contains(message, "alice has 5 jobs pending and may have at most 5")) << message;
  EXPECT_TRUE(Contains(message, "--max-queued-per-user")) << message;
  EXPECT_TRUE(Contains(message, "cancel some")) << message;
  // Another user's queue is their own; an array larger than the cap never fits.
  r = submit("bob", "");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 201) << r->body;
  r = submit("carol", "?count=6");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 429) << r->body;
  EXPECT_TRUE(Contains(r->body, "6 more do not fit")) << r->body;
}

// Runs the hangar binary with `args`; its exit code.
int Hangar(const std::string& args) {
  const std::string cmd = std::string(HANGAR_BINARY) + " " + args + " >/dev/null 2>&1";
  const int status = std::system(cmd.c_str());
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

TEST(HttpLimitsTest, HttpsIdleAndStalledHandshakesLeaveHealthzAnswering) {
  const std::string dir = ::testing::TempDir() + "/http-limits-tls-" + std::to_string(::getpid());
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  ASSERT_EQ(Hangar("certs init --dir " + dir), 0);
  ASSERT_EQ(Hangar("certs issue --controller --dir " + dir), 0);
  LocalCluster c(kCluster, {"--tls-dir", dir, "--http-header-timeout", "1s"});
  c.StartController();
  std::vector<int> idle;
  for (int i = 0; i < 50; ++i) idle.push_back(Connect("127.0.0.1", c.api_port()));
  // A handshake that starts and stalls is cut at the header timeout.
  const int stalled = Connect("127.0.0.2", c.api_port());
  ASSERT_TRUE(Send(stalled, std::string("\x16\x03\x01", 3)));
  bool closed = false;
  Read(
      stalled, 8000, [](const std::string&) { return false; }, &closed);
  EXPECT_TRUE(closed);
  ::close(stalled);
  for (int i = 0; i < 3; ++i) {
    httplib::SSLClient https("127.0.0.1", c.api_port());
    https.enable_server_certificate_verification(false);
    https.set_connection_timeout(5, 0);
    https.set_read_timeout(5, 0);
    https.set_keep_alive(true);
    for (int k = 0; k < 3; ++k) {  // keep-alive over TLS: parked and picked up again
      auto r = https.Get("/healthz");
      ASSERT_TRUE(r) << httplib::to_string(r.error());
      EXPECT_EQ(r->status, 200);
    }
  }
  CloseAll(idle);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace hangar::testing
