#include "controller/service/command_probe.h"

#include <gtest/gtest.h>

#include <future>
#include <thread>

namespace hangar::controller::service {
namespace {

// The agent's end of the node's stream, as the test plays it: what the prober sent, in order.
class Stream {
 public:
  void Put(const std::string& node, pb::ControllerMessage m) {
    std::lock_guard lock(mu_);
    sent_.emplace_back(node, std::move(m));
    cv_.notify_all();
  }
  // The n-th message sent (waiting for it).
  std::pair<std::string, pb::ControllerMessage> At(size_t n) {
    std::unique_lock lock(mu_);
    cv_.wait(lock, [&] { return sent_.size() > n; });
    return sent_[n];
  }
  size_t Size() {
    std::lock_guard lock(mu_);
    return sent_.size();
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::pair<std::string, pb::ControllerMessage>> sent_;
};

pb::SessionOutput Ended(uint64_t id, int code, const std::string& out = "") {
  pb::SessionOutput o;
  o.set_session_id(id);
  o.set_stdout(out);
  o.set_ended(true);
  o.set_exit_code(code);
  return o;
}

TEST(CommandProberTest, RunsTheCommandBesideTheTaskAndPassesOnExitZero) {
  Stream stream;
  CommandProber prober([&](const std::string& n, pb::ControllerMessage m) { stream.Put(n, m); });
  auto result = std::async(std::launch::async, [&] {
    return prober.Run("node-1", "7.0.0", 7, {"test", "-e", "ready"}, 5000);
  });
  const auto [node, open] = stream.At(0);
  EXPECT_EQ(node, "node-1");
  ASSERT_TRUE(open.has_session_open());
  const uint64_t id = open.session_open().session_id();
  EXPECT_TRUE(CommandProber::IsProbeSession(id));
  EXPECT_EQ(open.session_open().task_id(), "7.0.0");
  EXPECT_EQ(open.session_open().start().job_id(), 7u);
  EXPECT_EQ(open.session_open().start().argv_size(), 3);
  EXPECT_FALSE(open.session_open().start().tty());
  EXPECT_TRUE(stream.At(1).second.session_input().eof()) << "a probe reads no input";
  prober.FromAgent("node-2", Ended(id, 0));  // another node cannot speak for it
  EXPECT_EQ(result.wait_for(std::chrono::milliseconds(100)), std::future_status::timeout);
  prober.FromAgent("node-1", Ended(id, 0));
  const ProbeResult r = result.get();
  EXPECT_TRUE(r.passed) << r.detail;
}

TEST(CommandProberTest, AFailureSaysHowItEndedWithTheOutputsLastLine) {
  Stream stream;
  CommandProber prober([&](const std::string& n, pb::ControllerMessage m) { stream.Put(n, m); });
  auto result =
      std::async(std::launch::async, [&] { return prober.Run("n", "1.0.0", 1, {"check"}, 5000); });
  const uint64_t id = stream.At(0).second.session_open().session_id();
  stream.At(1);  // the end of its input, sent before any output can be acknowledged
  pb::SessionOutput chunk;
  chunk.set_session_id(id);
  chunk.set_stdout("loading weights\n");
  prober.FromAgent("n", chunk);
  EXPECT_EQ(stream.At(2).second.session_input().ack(), 16u) << "output is acknowledged";
  prober.FromAgent("n", Ended(id, 3, "model wedged\n"));
  const ProbeResult r = result.get();
  EXPECT_FALSE(r.passed);
  EXPECT_EQ(r.detail, "the command exited with 3: model wedged");
  EXPECT_FALSE(CommandProber::IsProbeSession(id | (uint64_t{1} << 62))) << "a step's session";
}

TEST(CommandProberTest, ACommandStillRunningAtItsTimeoutFailsAndIsHungUp) {
  Stream stream;
  CommandProber prober([&](const std::string& n, pb::ControllerMessage m) { stream.Put(n, m); });
  auto result = std::async(std::launch::async, [&] {
    return prober.Run("n", "1.0.0", 1, {"sleep", "60"}, 300);
  });
  pb::SessionOutput opened;
  opened.set_session_id(stream.At(0).second.session_open().session_id());
  opened.set_opened(true);
  prober.FromAgent("n", opened);
  const ProbeResult r = result.get();
  EXPECT_FALSE(r.passed);
  EXPECT_FALSE(r.unknown) << "the command ran, and hung: a failure";
  EXPECT_EQ(r.detail, "the command did not end within 300ms");
  ASSERT_EQ(stream.Size(), 3u);
  EXPECT_TRUE(stream.At(2).second.session_input().close());
  EXPECT_EQ(stream.At(2).second.session_input().session_id(),
            stream.At(0).second.session_open().session_id());
}

TEST(CommandProberTest, AnAgentThatNeverAnswersLeavesTheResultUnknown) {
  Stream stream;
  CommandProber prober([&](const std::string& n, pb::ControllerMessage m) { stream.Put(n, m); });
  const ProbeResult r = prober.Run("n", "1.0.0", 1, {"check"}, 100);
  EXPECT_TRUE(r.unknown) << r.detail;
  EXPECT_EQ(r.detail, "node n's agent did not answer within 100ms");
}

TEST(CommandProberTest, AnAgentThatGoesAwayLeavesItUnknownOneThatCannotRunItFailsIt) {
  Stream stream;
  CommandProber prober([&](const std::string& n, pb::ControllerMessage m) { stream.Put(n, m); });
  auto gone =
      std::async(std::launch::async, [&] { return prober.Run("n", "1.0.0", 1, {"x"}, 5000); });
  stream.At(0);
  prober.NodeGone("n");
  const ProbeResult g = gone.get();
  EXPECT_EQ(g.detail, "node n's agent went away during the probe");
  EXPECT_TRUE(g.unknown);
  auto refused =
      std::async(std::launch::async, [&] { return prober.Run("n", "1.0.0", 1, {"x"}, 5000); });
  pb::SessionOutput o = Ended(stream.At(2).second.session_open().session_id(), -1);
  o.set_error("task 1.0.0 is not running on node n");
  prober.FromAgent("n", o);
  const ProbeResult r = refused.get();
  EXPECT_EQ(r.detail, "the command could not run: task 1.0.0 is not running on node n");
  EXPECT_FALSE(r.unknown) << "the agent answered: the task is not there";
}

}  // namespace
}  // namespace hangar::controller::service
