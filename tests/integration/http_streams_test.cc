// Long-lived responses and TLS handshakes hold no request worker: with the controller's workers
// held to 8, more live feeds, log follows or stalled TLS handshakes than that leave /healthz and
// the rest of the API answering, and the streams keep delivering. A request line over 8 KiB is
// answered 414 with a sentence. Real controllers on loopback, spoken to with raw sockets. Nothing
// here depends on timing but generous bounds (answers within 5-10 s).
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
#include <functional>

#include "local_cluster.h"

namespace hangar::testing {
namespace {

constexpr const char* kCluster =
    "node_defaults: {gpus: 8, gpu_model: H100-SXM-80GB, gpu_memory: 80Gi, cpu: 64, memory: 512Gi}\n"
    "nodes: [{name: node-1}]\n";
constexpr int kWorkers = 8;
constexpr int kStreams = 20;  // more than the workers

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

// What arrives on `fd` within `ms`, appended to *got, until `enough` holds or the peer closes.
bool ReadUntil(int fd, int ms, std::string* got,
               const std::function<bool(const std::string&)>& enough, bool* closed = nullptr) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
  if (closed) *closed = false;
  while (!enough(*got)) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        until - std::chrono::steady_clock::now());
    if (left.count() <= 0) return false;
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(left.count())) <= 0) return false;
    char buf[16384];
    const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n <= 0) {
      if (closed) *closed = true;
      return enough(*got);
    }
    got->append(buf, static_cast<size_t>(n));
  }
  return true;
}

std::function<bool(const std::string&)> Has(const std::string& part) {
  return [part](const std::string& s) { return Contains(s, part); };
}

// GET /healthz from 127.0.0.1 on a fresh connection, 5 s to answer: the status (0: none).
int Healthz(int port) {
  httplib::Client c("127.0.0.1", port);
  c.set_connection_timeout(5, 0);
  c.set_read_timeout(5, 0);
  auto r = c.Get("/healthz");
  return r ? r->status : 0;
}

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

TEST(HttpStreamsTest, LiveFeedsBeyondTheWorkersLeaveTheApiAnsweringAndKeepDelivering) {
  LocalCluster c(kCluster, {"--http-max-workers", std::to_string(kWorkers),
                            "--http-max-streams-per-client", "30"});
  c.StartController();
  // Each feed from a snapshot that is gone: its first event carries every row.
  std::vector<int> feeds;
  std::vector<std::string> got(kStreams);
  for (int i = 0; i < kStreams; ++i) {
    feeds.push_back(Connect("127.0.0.2", c.api_port()));
    ASSERT_GE(feeds.back(), 0);
    ASSERT_TRUE(
        Send(feeds.back(), "GET /v1/dashboard/feed?since=999 HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"));
  }
  for (int i = 0; i < kStreams; ++i) {
    EXPECT_TRUE(ReadUntil(feeds[i], 10000, &got[i], Has("event: gpus")))
        << "feed " << i << " got: " << got[i];
    EXPECT_TRUE(Contains(got[i], "HTTP/1.1 200")) << got[i];
    EXPECT_TRUE(Contains(got[i], "text/event-stream")) << got[i];
    got[i].clear();
  }
  // Every feed is open, and the API answers others.
  for (int i = 0; i < 5; ++i) EXPECT_EQ(Healthz(c.api_port()), 200);
  int status = 0;
  c.Get("/v1/jobs", &status);
  EXPECT_EQ(status, 200);
  EXPECT_EQ(Metric(c, "hangar_http_streams_open"), kStreams);
  // A submitted job moves the jobs' generation: every feed says so.
  c.Post("/v1/jobs", R"({"name": "w", "tasks": [{"gpus": 1, "command": ["true"]}]})", &status);
  EXPECT_EQ(status, 201);
  for (int i = 0; i < kStreams; ++i) {
    EXPECT_TRUE(ReadUntil(feeds[i], 10000, &got[i], Has("event: jobs")))
        << "feed " << i << " got: " << got[i];
  }
  // A client over its stream cap is told why; one that left frees its place.
  LocalCluster::WaitFor([&] { return Metric(c, "hangar_http_streams_open") == kStreams; },
                        5 * kSecond);
  std::vector<int> more;
  std::string answer;
  for (int i = 0; i < 11; ++i) {  // one at a time: the 11th is the one over the cap
    answer.clear();
    more.push_back(Connect("127.0.0.2", c.api_port()));
    ASSERT_TRUE(Send(more.back(), "GET /v1/dashboard/feed HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"));
    ReadUntil(more.back(), 10000, &answer, Has("\r\n\r\n"));
  }
  ReadUntil(more.back(), 10000, &answer, Has("feeds and log follows"));
  EXPECT_TRUE(Contains(answer, "HTTP/1.1 503")) << answer;
  EXPECT_TRUE(Contains(answer, "127.0.0.2 already holds 30 live feeds and log follows")) << answer;
  CloseAll(more);
  CloseAll(feeds);
  EXPECT_TRUE(LocalCluster::WaitFor([&] { return Metric(c, "hangar_http_streams_open") == 0; },
                                    10 * kSecond));
}

TEST(HttpStreamsTest, LogFollowsBeyondTheWorkersLeaveTheApiAnsweringAndEndWithTheTask) {
  LocalCluster c(kCluster, {"--http-max-workers", std::to_string(kWorkers)});
  c.StartController();
  c.StartAgent("node-1", {"--stop-tasks-on-exit"});
  ASSERT_TRUE(c.WaitForAgents(1));
  int status = 0;
  auto job = c.Post("/v1/jobs",
                    R"({"name": "chatter", "tasks": [{"gpus": 1, "command": ["/bin/sh", "-c",
                        "echo first line; while true; do echo chatter line; sleep 0.1; done"]}]})",
                    &status);
  ASSERT_EQ(status, 201) << job.dump();
  const uint64_t id = job["id"];
  ASSERT_TRUE(c.WaitForJobState(id, "running", 20 * kSecond));
  std::vector<int> follows;
  std::vector<std::string> got(kStreams);
  for (int i = 0; i < kStreams; ++i) {
    follows.push_back(Connect("127.0.0.2", c.api_port()));
    ASSERT_TRUE(Send(follows.back(), "GET /v1/jobs/" + std::to_string(id) +
                                         "/logs?follow=1 HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"));
  }
  for (int i = 0; i < kStreams; ++i) {
    EXPECT_TRUE(ReadUntil(follows[i], 10000, &got[i], Has("chatter line"))) << got[i];
    EXPECT_TRUE(Contains(got[i], "HTTP/1.1 200")) << got[i];
    EXPECT_TRUE(Contains(got[i], "first line")) << got[i];  // from the start of the log
  }
  for (int i = 0; i < 5; ++i) EXPECT_EQ(Healthz(c.api_port()), 200);
  EXPECT_EQ(c.Get("/v1/jobs", &status)["jobs"].size(), 1u);
  EXPECT_EQ(status, 200);
  EXPECT_EQ(Metric(c, "hangar_http_streams_open"), kStreams);
  // The follows still stream, and end (the chunked body's last chunk) when the task does.
  for (int i = 0; i < kStreams; ++i) {
    got[i].clear();
    EXPECT_TRUE(ReadUntil(follows[i], 5000, &got[i], Has("chatter line"))) << got[i];
  }
  c.Post("/v1/jobs/" + std::to_string(id) + "/cancel", "", &status);
  EXPECT_EQ(status, 200);
  for (int i = 0; i < kStreams; ++i) {
    bool closed = false;
    EXPECT_TRUE(ReadUntil(follows[i], 20000, &got[i], Has("\r\n0\r\n\r\n"), &closed)) << got[i];
  }
  CloseAll(follows);
  EXPECT_TRUE(LocalCluster::WaitFor([&] { return Metric(c, "hangar_http_streams_open") == 0; },
                                    10 * kSecond));
}

// Runs the hangar binary with `args`; its exit code.
int Hangar(const std::string& args) {
  const std::string cmd = std::string(HANGAR_BINARY) + " " + args + " >/dev/null 2>&1";
  const int status = std::system(cmd.c_str());
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

TEST(HttpStreamsTest, StalledTlsHandshakesBeyondTheWorkersLeaveHttpsAnswering) {
  const std::string dir = ::testing::TempDir() + "/http-streams-tls-" + std::to_string(::getpid());
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  ASSERT_EQ(Hangar("certs init --dir " + dir), 0);
  ASSERT_EQ(Hangar("certs issue --controller --dir " + dir), 0);
  // A header timeout longer than the test: a handshake that held a worker would hold it throughout.
  LocalCluster c(kCluster, {"--tls-dir", dir, "--http-max-workers", std::to_string(kWorkers),
                            "--http-header-timeout", "60s"});
  c.StartController();
  // The start of a ClientHello (a TLS record header), then nothing.
  std::vector<int> stalled;
  for (int i = 0; i < kStreams; ++i) {
    stalled.push_back(Connect("127.0.0.2", c.api_port()));
    ASSERT_GE(stalled.back(), 0);
    ASSERT_TRUE(Send(stalled.back(), std::string("\x16\x03\x01\x02", 4)));
  }
  for (int i = 0; i < 3; ++i) {
    httplib::SSLClient https("127.0.0.1", c.api_port());
    https.enable_server_certificate_verification(false);
    https.set_connection_timeout(5, 0);
    https.set_read_timeout(5, 0);
    auto r = https.Get("/healthz");
    ASSERT_TRUE(r) << httplib::to_string(r.error());
    EXPECT_EQ(r->status, 200);
  }
  // A live feed over https streams too (the pump writes it through the connection's TLS session).
  {
    httplib::SSLClient https("127.0.0.1", c.api_port());
    https.enable_server_certificate_verification(false);
    https.set_connection_timeout(5, 0);
    https.set_read_timeout(10, 0);
    std::string feed;
    int status = 0;
    https.Get(
        "/v1/dashboard/feed?since=999", httplib::Headers{},
        [&](const httplib::Response& res) {
          status = res.status;
          return true;
        },
        [&](const char* data, size_t n) {
          feed.append(data, n);
          return !Contains(feed, "event: gpus");  // enough: stop reading
        });
    EXPECT_EQ(status, 200);
    EXPECT_TRUE(Contains(feed, "event: gpus")) << feed;
  }
  // The stalled ones are still waiting for their handshake, not cut.
  for (int fd : stalled) {
    std::string got;
    bool closed = false;
    ReadUntil(
        fd, 50, &got, [](const std::string&) { return false; }, &closed);
    EXPECT_FALSE(closed);
  }
  CloseAll(stalled);
  std::filesystem::remove_all(dir);
}

TEST(HttpStreamsTest, RequestLineOverItsCapIsAnswered414) {
  LocalCluster c(kCluster);
  c.StartController();
  for (const size_t size : {size_t{10 * 1024}, size_t{100 * 1024}}) {
    const int fd = Connect("127.0.0.2", c.api_port());
    ASSERT_GE(fd, 0);
    // Sent whole, as a client would (the answer may come before the server has read it all).
    const std::string request =
        "GET /v1/jobs?user=" + std::string(size, 'u') + " HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n";
    ::send(fd, request.data(), request.size(), MSG_NOSIGNAL);
    std::string got;
    ReadUntil(fd, 10000, &got, [](const std::string&) { return false; });  // until it closes
    EXPECT_TRUE(Contains(got, "HTTP/1.1 414 URI Too Long")) << size << ": " << got.substr(0, 300);
    EXPECT_TRUE(Contains(got, "the request line is over 8 KiB")) << got.substr(0, 300);
    ::close(fd);
  }
  // Headers over 64 KiB are answered 431.
  const int fd = Connect("127.0.0.2", c.api_port());
  std::string huge = "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n";
  while (huge.size() < 100 * 1024) huge += "X-Pad: " + std::string(100, 'p') + "\r\n";
  ::send(fd, huge.data(), huge.size(), MSG_NOSIGNAL);
  std::string got;
  ReadUntil(fd, 10000, &got, [](const std::string&) { return false; });
  EXPECT_TRUE(Contains(got, "HTTP/1.1 431")) << got.substr(0, 300);
  ::close(fd);
  EXPECT_EQ(Healthz(c.api_port()), 200);
  EXPECT_GE(Metric(c, "hangar_http_connections_cut_total{reason=\"uri_too_long\"}"), 2);
}

}  // namespace
}  // namespace hangar::testing
