#include "agent/session_host.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <thread>

#include "agent/session_target.h"

namespace hangar::agent {
namespace {

// What a host sent, per session, as the controller would collect it.
class Collector {
 public:
  SessionHost::Send Sink() {
    return [this](v1::SessionOutput o) {
      std::lock_guard lock(mu_);
      auto& s = sessions_[o.session_id()];
      s.out += o.stdout();
      s.err += o.stderr();
      s.opened = s.opened || o.opened();
      if (o.ended()) {
        s.ended = true;
        s.exit_code = o.exit_code();
        s.error = o.error();
      }
      cv_.notify_all();
    };
  }
  struct Seen {
    std::string out, err, error;
    bool opened = false, ended = false;
    int exit_code = 0;
  };
  // Waits until `pred` holds for session `id` (10 s at most); a copy of it then.
  Seen WaitFor(uint64_t id, const std::function<bool(const Seen&)>& pred) {
    std::unique_lock lock(mu_);
    cv_.wait_for(lock, std::chrono::seconds(10), [&] { return pred(sessions_[id]); });
    return sessions_[id];
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::map<uint64_t, Seen> sessions_;
};

SpawnRequest Program(std::vector<std::string> argv) {
  SpawnRequest r;
  r.argv = std::move(argv);
  r.env = {"PATH=/usr/bin:/bin"};
  return r;
}

v1::SessionInput Input(uint64_t id) {
  v1::SessionInput in;
  in.set_session_id(id);
  return in;
}

TEST(SessionHostTest, AnExecOnPipesKeepsStdoutAndStderrApartAndEndsWithItsStatus) {
  Collector c;
  SessionHost host(c.Sink());
  host.OpenExec(1, Program({"sh", "-c", "read line; echo got-$line; echo warn >&2; exit 3"}), false,
                0, 0);
  v1::SessionInput in = Input(1);
  in.set_data("hello\n");
  host.Input(in);
  auto s = c.WaitFor(1, [](const auto& s) { return s.ended; });
  EXPECT_TRUE(s.opened);
  EXPECT_EQ(s.out, "got-hello\n");
  EXPECT_EQ(s.err, "warn\n");
  EXPECT_EQ(s.exit_code, 3);
}

TEST(SessionHostTest, StdinsEndReachesAProgramOnPipes) {
  Collector c;
  SessionHost host(c.Sink());
  host.OpenExec(2, Program({"wc", "-c"}), false, 0, 0);
  v1::SessionInput in = Input(2);
  in.set_data("12345");
  in.set_eof(true);
  host.Input(in);
  auto s = c.WaitFor(2, [](const auto& s) { return s.ended; });
  EXPECT_EQ(s.out, "5\n");
  EXPECT_EQ(s.exit_code, 0);
}

TEST(SessionHostTest, ATerminalExecHasItsSizeAndFollowsAResize) {
  Collector c;
  SessionHost host(c.Sink());
  host.OpenExec(3, Program({"sh", "-c", "stty size; read x; stty size"}), true, 30, 100);
  c.WaitFor(3, [](const auto& s) { return s.out.find("30 100") != std::string::npos; });
  v1::SessionInput resize = Input(3);
  resize.set_rows(40);
  resize.set_cols(120);
  host.Input(resize);
  v1::SessionInput line = Input(3);
  line.set_data("\r");
  host.Input(line);
  auto s = c.WaitFor(3, [](const auto& s) { return s.ended; });
  EXPECT_NE(s.out.find("30 100"), std::string::npos) << s.out;
  EXPECT_NE(s.out.find("40 120"), std::string::npos) << s.out;
}

TEST(SessionHostTest, AProgramThatCannotRunEndsTheSessionSayingWhy) {
  Collector c;
  SessionHost host(c.Sink());
  host.OpenExec(4, Program({"no-such-program-here"}), false, 0, 0);
  auto s = c.WaitFor(4, [](const auto& s) { return s.ended; });
  EXPECT_FALSE(s.opened);
  EXPECT_NE(s.error.find("no-such-program-here"), std::string::npos) << s.error;
}

TEST(SessionHostTest, AnAttachSeesWhatTheTerminalPrintedAndItsTasksStatus) {
  Collector c;
  SessionHost host(c.Sink());
  const std::string dir = ::testing::TempDir() + "/session_host_attach";
  std::filesystem::create_directories(dir);
  auto follower = host.CreateTerminal("7.0.0", dir + "/stdout.log", static_cast<uid_t>(-1));
  ASSERT_TRUE(follower.ok()) << follower.status().message();
  // The follower stands for the task: what it writes is the terminal's output.
  ASSERT_EQ(write(*follower, "before attach\n", 14), 14);
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  host.OpenAttach(9, "7.0.0", 24, 80);
  c.WaitFor(9, [](const auto& s) { return s.out.find("before attach") != std::string::npos; });
  ASSERT_EQ(write(*follower, "after\n", 6), 6);
  c.WaitFor(9, [](const auto& s) { return s.out.find("after") != std::string::npos; });
  close(*follower);
  host.TaskEnded("7.0.0", 5, 0);
  auto s = c.WaitFor(9, [](const auto& s) { return s.ended; });
  EXPECT_EQ(s.exit_code, 5);
  std::ifstream log(dir + "/stdout.log");
  std::string first;
  std::getline(log, first);
  EXPECT_EQ(first, "before attach\r") << "the terminal's output is the task's log too";
}

TEST(SessionHostTest, AnAttachToATaskWithoutATerminalIsRefused) {
  Collector c;
  SessionHost host(c.Sink());
  host.OpenAttach(11, "8.0.0", 24, 80);
  auto s = c.WaitFor(11, [](const auto& s) { return s.ended; });
  EXPECT_NE(s.error.find("no terminal"), std::string::npos) << s.error;
}

TEST(SessionHostTest, AnAttachFeedsATasksStdinPipeAndItsEofClosesIt) {
  Collector c;
  SessionHost host(c.Sink());
  auto read_end = host.CreateStdinPipe("12.0.0");
  ASSERT_TRUE(read_end.ok()) << read_end.status().message();
  host.OpenAttach(30, "12.0.0", 0, 0);
  c.WaitFor(30, [](const auto& s) { return s.opened; });
  v1::SessionInput in = Input(30);
  in.set_data("line one\n");
  host.Input(in);
  v1::SessionInput last = Input(30);
  last.set_data("two");
  last.set_eof(true);
  host.Input(last);
  // The task's side: everything typed, then end of file (a blocking read; the host closes it).
  std::string got;
  char buf[64];
  for (;;) {
    pollfd p{*read_end, POLLIN, 0};
    if (poll(&p, 1, 10'000) <= 0) break;  // a host that never closes it fails the test
    const ssize_t n = read(*read_end, buf, sizeof buf);
    if (n <= 0) break;
    got.append(buf, n);
  }
  EXPECT_EQ(got, "line one\ntwo")
      << "no \\x04 or other terminal bytes: a pipe carries them as sent";
  close(*read_end);
  host.TaskEnded("12.0.0", 4, 0);
  auto s = c.WaitFor(30, [](const auto& s) { return s.ended; });
  EXPECT_EQ(s.exit_code, 4);
  EXPECT_EQ(s.out, "");
}

TEST(SessionHostTest, APortSessionCarriesBothWaysHalfClosesAndEndsWhenTheServerCloses) {
  Collector c;
  SessionHost host(c.Sink());
  int ends[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, ends), 0);
  fcntl(ends[0], F_SETFL, fcntl(ends[0], F_GETFL) | O_NONBLOCK);
  const int server = ends[1];  // the task's server; the host carries ends[0]
  timeval limit{10, 0};        // a host that never half-closes fails the test, not hangs it
  setsockopt(server, SOL_SOCKET, SO_RCVTIMEO, &limit, sizeof limit);
  host.OpenPort(20, ends[0]);
  v1::SessionInput in = Input(20);
  in.set_data("GET / HTTP/1.0\r\n\r\n");
  in.set_eof(true);  // the client's half-close reaches the server as its end of file
  host.Input(in);
  std::string request;
  char buf[256];
  for (ssize_t n; (n = read(server, buf, sizeof buf)) > 0;) request.append(buf, n);
  EXPECT_EQ(request, "GET / HTTP/1.0\r\n\r\n");
  EXPECT_FALSE(c.WaitFor(20, [](const auto& s) { return s.opened; }).ended)
      << "a half-close leaves the way back open";
  ASSERT_EQ(write(server, "HTTP/1.0 200 OK\r\n\r\nhi", 21), 21);
  close(server);
  auto s = c.WaitFor(20, [](const auto& s) { return s.ended; });
  EXPECT_TRUE(s.opened);
  EXPECT_EQ(s.out, "HTTP/1.0 200 OK\r\n\r\nhi");
  EXPECT_EQ(s.error, "");
}

TEST(SessionHostTest, APortSessionsClientLeavingClosesTheConnection) {
  Collector c;
  SessionHost host(c.Sink());
  int ends[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, ends), 0);
  fcntl(ends[0], F_SETFL, fcntl(ends[0], F_GETFL) | O_NONBLOCK);
  host.OpenPort(21, ends[0]);
  c.WaitFor(21, [](const auto& s) { return s.opened; });
  v1::SessionInput close_it = Input(21);
  close_it.set_close(true);
  host.Input(close_it);
  timeval limit{10, 0};
  setsockopt(ends[1], SOL_SOCKET, SO_RCVTIMEO, &limit, sizeof limit);
  char buf[8];
  EXPECT_EQ(read(ends[1], buf, sizeof buf), 0) << "the server sees the connection end";
  close(ends[1]);
}

TEST(SessionTargetTest, ReadsAProcesssUserEnvironmentAndFolder) {
  setenv("HANGAR_SESSION_TARGET_TEST", "yes", 1);
  auto t = ReadTaskSurroundings(getpid());
  ASSERT_TRUE(t.ok()) << t.status().message();
  EXPECT_EQ(t->credentials.uid, geteuid());
  EXPECT_EQ(t->workdir, std::filesystem::current_path().string());
  // /proc/PID/environ is the environment the process started with, as a task's is.
  EXPECT_FALSE(t->env.empty());
  EXPECT_TRUE(ReadTaskSurroundings(0x3fffffff).status().code() == StatusCode::kNotFound);
}

}  // namespace
}  // namespace hangar::agent
