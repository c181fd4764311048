#include "agent/session_host.h"

#include <gtest/gtest.h>
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
