#include "controller/stream_pump.h"

#include <gtest/gtest.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace hangar::controller {
namespace {

// A connected pair of non-blocking stream sockets: the server's end (handed to the pump) and the
// client's.
struct Pair {
  int server = -1, client = -1;
  Pair() {
    int fds[2];
    if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, fds) == 0) {
      server = fds[0];
      client = fds[1];
    }
  }
  ~Pair() {
    if (client >= 0) ::close(client);
  }
};

// What the client end receives within `ms`, until `until` is in it or the pump closes it.
std::string Receive(int fd, int ms, const std::string& until, bool* closed = nullptr) {
  std::string got;
  if (closed) *closed = false;
  const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
  while (until.empty() || got.find(until) == std::string::npos) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        end - std::chrono::steady_clock::now());
    if (left.count() <= 0) break;
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(left.count())) <= 0) break;
    char buf[65536];
    const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n <= 0) {
      if (closed) *closed = n == 0 || errno != EAGAIN;
      if (n == 0 || errno != EAGAIN) break;
      continue;
    }
    got.append(buf, static_cast<size_t>(n));
  }
  return got;
}

bool Eventually(const std::function<bool()>& pred) {
  for (int i = 0; i < 200; ++i) {  // 10 s
    if (pred()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return pred();
}

class StreamPumpTest : public ::testing::Test {
 protected:
  StreamPump& Pump(const StreamLimits& limits = {}) {
    pump_ = std::make_unique<StreamPump>(limits, &stats_, [this](const std::string& client) {
      std::lock_guard<std::mutex> l(mu_);
      released_.push_back(client);
    });
    return *pump_;
  }
  size_t released() {
    std::lock_guard<std::mutex> l(mu_);
    return released_.size();
  }
  StreamStats stats_;
  std::mutex mu_;
  std::vector<std::string> released_;
  std::unique_ptr<StreamPump> pump_;
};

TEST_F(StreamPumpTest, WritesTheHeadThenChunksThenTheLastChunkAndCloses) {
  StreamPump& pump = Pump();
  Pair p;
  auto sink = pump.Open("10.0.0.1", "HTTP/1.1 200 OK\r\n\r\n", false);
  ASSERT_TRUE(sink.ok());
  EXPECT_TRUE((*sink)->Write(std::string_view("hello ")));  // queued before the connection comes
  pump.Attach(*sink, p.server, nullptr);
  EXPECT_TRUE((*sink)->Write(std::string_view("world")));
  (*sink)->Finish();
  EXPECT_FALSE((*sink)->Write(std::string_view("late")));
  bool closed = false;
  const std::string got = Receive(p.client, 10000, "", &closed);
  EXPECT_EQ(got, "HTTP/1.1 200 OK\r\n\r\n6\r\nhello \r\n5\r\nworld\r\n0\r\n\r\n");
  EXPECT_TRUE(closed);
  EXPECT_TRUE(Eventually([&] { return released() == 1; }));
  EXPECT_EQ(stats_.open.load(), 0);
}

TEST_F(StreamPumpTest, ManyStreamsShareOneThreadAndAClientThatLeavesIsNoticed) {
  StreamPump& pump = Pump();
  std::vector<std::unique_ptr<Pair>> pairs;
  std::vector<std::shared_ptr<StreamSink>> sinks;
  for (int i = 0; i < 200; ++i) {
    pairs.push_back(std::make_unique<Pair>());
    auto s = pump.Open("10.0.0." + std::to_string(i % 50), "H\r\n\r\n", true);
    ASSERT_TRUE(s.ok());
    pump.Attach(*s, pairs.back()->server, nullptr);
    sinks.push_back(*s);
  }
  const StreamSink::Chunk shared = StreamSink::Frame("event: x\ndata: {}\n\n");
  for (auto& s : sinks) EXPECT_TRUE(s->Write(shared));
  for (auto& p : pairs)
    EXPECT_NE(Receive(p->client, 10000, "data: {}").find("event: x"), std::string::npos);
  EXPECT_EQ(stats_.open.load(), 200);
  ::close(pairs[7]->client);
  pairs[7]->client = -1;
  EXPECT_TRUE(Eventually([&] { return !sinks[7]->open(); }));
  EXPECT_TRUE(sinks[8]->open());
  EXPECT_EQ(released(), 1u);
}

TEST_F(StreamPumpTest, StreamsOverTheCapsAreRefusedWithASentence) {
  StreamLimits limits;
  limits.max_streams = 3;
  limits.max_streams_per_client = 2;
  StreamPump& pump = Pump(limits);
  auto a = pump.Open("10.0.0.1", "H", false);
  auto b = pump.Open("10.0.0.1", "H", false);
  ASSERT_TRUE(a.ok() && b.ok());
  auto c = pump.Open("10.0.0.1", "H", false);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(c.status().message().find("10.0.0.1 already holds 2 live feeds and log follows"),
            std::string::npos)
      << c.status().message();
  auto d = pump.Open("10.0.0.2", "H", false);
  ASSERT_TRUE(d.ok());
  auto e = pump.Open("10.0.0.3", "H", false);
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.status().message().find("--http-max-streams"), std::string::npos)
      << e.status().message();
  EXPECT_EQ(stats_.refused.load(), 2);
}

TEST_F(StreamPumpTest, AReaderThatDoesNotKeepUpIsDroppedNotBufferedForever) {
  StreamLimits limits;
  limits.max_buffered_bytes = 256 * 1024;
  StreamPump& pump = Pump(limits);
  Pair p;
  auto sink = pump.Open("10.0.0.1", "H", false);
  ASSERT_TRUE(sink.ok());
  pump.Attach(*sink, p.server, nullptr);
  // The client reads nothing: the socket's buffers fill, then the queue up to its cap.
  const std::string block(16 * 1024, 'x');
  int writes = 0;
  while ((*sink)->Write(std::string_view(block)) && writes < 10000) ++writes;
  EXPECT_LT(writes, 10000);
  EXPECT_FALSE((*sink)->open());
  EXPECT_TRUE(Eventually([&] { return released() == 1; }));
  EXPECT_EQ(stats_.dropped_slow.load(), 1);
}

TEST_F(StreamPumpTest, QuietEventStreamsGetKeepAliveComments) {
  StreamLimits limits;
  limits.keepalive = 200;
  StreamPump& pump = Pump(limits);
  Pair p;
  auto sink = pump.Open("10.0.0.1", "H\r\n\r\n", true);
  ASSERT_TRUE(sink.ok());
  pump.Attach(*sink, p.server, nullptr);
  EXPECT_NE(Receive(p.client, 10000, ": keep-alive\n\n").find(": keep-alive\n\n"),
            std::string::npos);
}

TEST_F(StreamPumpTest, StopEndsEveryStreamAndRefusesNewOnes) {
  StreamPump& pump = Pump();
  Pair p;
  auto sink = pump.Open("10.0.0.1", "H", false);
  ASSERT_TRUE(sink.ok());
  pump.Attach(*sink, p.server, nullptr);
  pump.Stop();
  EXPECT_FALSE((*sink)->open());
  EXPECT_FALSE((*sink)->Write(std::string_view("x")));
  EXPECT_FALSE(pump.Open("10.0.0.1", "H", false).ok());
  bool closed = false;
  Receive(p.client, 5000, "", &closed);
  EXPECT_TRUE(closed);
  EXPECT_EQ(released(), 1u);
}

}  // namespace
}  // namespace hangar::controller
