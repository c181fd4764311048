// Failover (issue 18): three controllers on one PostgreSQL store of the test's own, four agents
// that know all three, and a steady submit load. The leader is killed, stopped past its lease,
// and the store restarted under it; every run ends with the invariant checker: every accepted job
// ended exactly once, no GPU held by two live tasks at once, no task started twice.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>

#include <atomic>
#include <cstdio>
#include <mutex>
#include <thread>

#include "ha_cluster.h"

namespace hangar::testing {
namespace {

// Submits a 2-GPU job that runs 0.3 s every 50 ms until stopped.
class Load {
 public:
  explicit Load(HaCluster* c) : c_(c), thread_([this] { Run(); }) {}
  ~Load() { Stop(); }
  void Stop() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
  }
  std::vector<uint64_t> accepted() {
    std::lock_guard<std::mutex> l(mu_);
    return accepted_;
  }
  int failed() const { return failed_; }

 private:
  void Run() {
    while (!stop_) {
      const uint64_t id = c_->Submit(1, 2, 0.3, 10 * kSecond);
      if (id == 0) {
        ++failed_;
      } else {
        std::lock_guard<std::mutex> l(mu_);
        accepted_.push_back(id);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  }
  HaCluster* c_;
  std::atomic<bool> stop_{false};
  std::atomic<int> failed_{0};
  std::mutex mu_;
  std::vector<uint64_t> accepted_;
  std::thread thread_;
};

void ExpectRunWasCorrect(HaCluster* c, Load& load) {
  load.Stop();
  EXPECT_EQ(load.failed(), 0) << "submissions that no controller accepted within 10 s";
  const auto ids = load.accepted();
  EXPECT_GT(ids.size(), 20u);
  EXPECT_TRUE(c->WaitEnded(ids, 60 * kSecond)) << c->Describe();
  const Invariants v = c->Check(ids);
  std::string problems;
  for (const auto& p : v.problems) problems += p + "\n";
  EXPECT_TRUE(v.ok()) << problems << c->Describe();
  EXPECT_EQ(v.jobs_lost, 0);
  EXPECT_EQ(v.double_allocations, 0);
  EXPECT_EQ(v.tasks_started_twice, 0);
}

class FailoverTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto c = HaCluster::Start(HaOptions{});
    ASSERT_TRUE(c.ok()) << c.status().ToString();
    c_ = std::move(*c);
  }
  int64_t Epoch() {
    auto j = c_->Get("/v1/leader");
    return j.is_object() && j["leader"].is_object() ? j["leader"].value("epoch", int64_t{0}) : 0;
  }
  // A new leader other than `old`, within `timeout`.
  int NewLeader(int old, Duration timeout) {
    const int64_t until = MonotonicNanos() + timeout * 1'000'000;
    int l = c_->Leader();
    while ((l < 0 || l == old) && MonotonicNanos() < until) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
      l = c_->Leader();
    }
    return l == old ? -1 : l;
  }
  void ExpectInvariants(Load& load) { ExpectRunWasCorrect(c_.get(), load); }
  std::unique_ptr<HaCluster> c_;
};

std::string Shell(const std::string& cmd) {
  std::string out;
  FILE* p = popen((cmd + " 2>&1").c_str(), "r");
  char buf[512];
  while (p && fgets(buf, sizeof buf, p)) out += buf;
  if (p) pclose(p);
  return out;
}

TEST_F(FailoverTest, StandbysPointToTheLeaderAndTheCliFindsIt) {
  const int leader = c_->Leader();
  ASSERT_EQ(leader, 0);
  // A standby answers an API call with 503 and the leader's address, and does not act.
  const std::string standby = c_->api(1);
  const std::string got = Shell("curl -s -i -X POST --data 'name: x' " + standby + "/v1/jobs");
  EXPECT_NE(got.find("503"), std::string::npos) << got;
  EXPECT_NE(got.find("X-Hangar-Leader: " + c_->api(0)), std::string::npos) << got;
  EXPECT_NE(got.find("is a standby; the leader is ctl-0 at " + c_->api(0) + " (epoch 1)"),
            std::string::npos)
      << got;
  // `hangar status` against a standby says who leads; the CLI given the list reaches the leader.
  const std::string status = Shell(std::string(HANGAR_BINARY) + " status --server " + standby);
  EXPECT_NE(status.find("(standby)"), std::string::npos) << status;
  EXPECT_NE(status.find("leader      ctl-0 at " + c_->api(0)), std::string::npos) << status;
  EXPECT_NE(status.find("epoch       1"), std::string::npos) << status;
  // It keeps a copy of the store, to take over without loading it whole.
  EXPECT_NE(status.find("copy        "), std::string::npos) << status;
  EXPECT_NE(status.find(" caught up "), std::string::npos) << status;
  const std::string list = c_->api(2) + "," + c_->api(1) + "," + c_->api(0);
  EXPECT_NE(Shell(std::string(HANGAR_BINARY) + " nodes --server " + list).find("node-4"),
            std::string::npos);
  c_->Signal(0, SIGKILL);
  for (int i = 0; i < 200 && c_->Alive(0); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  ASSERT_FALSE(c_->Alive(0));
  // The CLI rides over the takeover (it retries the list while controllers hand over).
  const std::string nodes = Shell(std::string(HANGAR_BINARY) + " nodes --server " + list);
  EXPECT_NE(nodes.find("node-4"), std::string::npos) << nodes;
  // `status` answers from the first controller of the list that answers: a standby says the
  // lease as it last read it (every --lease-poll), so the new epoch shows within a poll or two.
  std::string after;
  for (int i = 0; i < 50; ++i) {
    after = Shell(std::string(HANGAR_BINARY) + " status --server " + list);
    if (after.find("epoch       2") != std::string::npos) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_NE(after.find("epoch       2"), std::string::npos) << after;
}

TEST_F(FailoverTest, AStoppedLeaderReleasesItsLease) {
  ASSERT_EQ(c_->Leader(), 0);
  c_->Signal(0, SIGTERM);
  const int st = c_->WaitExit(0, 10 * kSecond);
  ASSERT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << "status " << st << c_->Describe();
  const int64_t t0 = MonotonicNanos();
  EXPECT_GE(c_->WaitLeader(5 * kSecond), 1) << c_->Describe();
  // Well within the 1.5 s lease: it was released, not left to expire.
  EXPECT_LT((MonotonicNanos() - t0) / 1e9, 1.0) << c_->Describe();
  EXPECT_NE(c_->Describe().find("ctl-0: released the lease (epoch 1)"), std::string::npos)
      << c_->Describe();
}

TEST_F(FailoverTest, KillingTheLeaderUnderLoadLosesNothing) {
  Load load(c_.get());
  int64_t epoch = 1;
  for (int round = 0; round < 3; ++round) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1500));
    const int old = c_->Leader();
    ASSERT_GE(old, 0) << c_->Describe();
    const int64_t t0 = MonotonicNanos();
    c_->Signal(old, SIGKILL);
    ASSERT_NE(c_->WaitExit(old, 5 * kSecond), -1);
    const int now = NewLeader(old, 5 * kSecond);
    ASSERT_GE(now, 0) << "no standby took over" << c_->Describe();
    const double took = (MonotonicNanos() - t0) / 1e9;
    EXPECT_LT(took, 3.0) << "takeover after kill -9";
    const int64_t e = Epoch();
    EXPECT_GT(e, epoch) << "the epoch grows at every takeover";
    epoch = e;
    // It followed the store while it stood by: it restored from its copy, not a full load.
    EXPECT_NE(Shell("grep -c \"(a standby's copy, \" " + c_->dir() + "/ctl-" + std::to_string(now) +
                    ".log"),
              "0\n")
        << c_->Describe();
    ASSERT_TRUE(c_->StartController(old).ok()) << c_->Describe();  // back, as a standby
  }
  std::this_thread::sleep_for(std::chrono::seconds(1));
  ExpectInvariants(load);
}

TEST_F(FailoverTest, AStoppedLeaderWokenPastItsLeaseDoesNotAct) {
  Load load(c_.get());
  std::this_thread::sleep_for(std::chrono::seconds(1));
  const int old = c_->Leader();
  ASSERT_EQ(old, 0);
  c_->Signal(old, SIGSTOP);
  const int now = NewLeader(old, 5 * kSecond);
  ASSERT_GE(now, 0) << "no standby took over from the stopped leader" << c_->Describe();
  std::this_thread::sleep_for(std::chrono::seconds(2));  // the new leader runs jobs meanwhile
  c_->Signal(old, SIGCONT);
  const int st = c_->WaitExit(old, 3 * kSecond);
  ASSERT_NE(st, -1) << "the woken leader still runs" << c_->Describe();
  EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 75) << "status " << st << c_->Describe();
  EXPECT_EQ(c_->Leader(), now);
  std::this_thread::sleep_for(std::chrono::seconds(1));
  ExpectInvariants(load);
}

TEST_F(FailoverTest, PostgresRestartedUnderTheControllers) {
  Load load(c_.get());
  std::this_thread::sleep_for(std::chrono::seconds(1));
  ASSERT_TRUE(c_->postgres().Restart().ok());
  // A controller whose commit or lease failed exits (a supervisor would restart it); one leads.
  std::this_thread::sleep_for(std::chrono::seconds(2));
  for (int i = 0; i < c_->controllers(); ++i) {
    if (!c_->Alive(i)) {
      ASSERT_TRUE(c_->StartController(i).ok()) << c_->Describe();
    }
  }
  EXPECT_GE(c_->WaitLeader(10 * kSecond), 0) << c_->Describe();
  std::this_thread::sleep_for(std::chrono::seconds(2));
  ExpectInvariants(load);
}

// The leader's link to PostgreSQL goes silent while agents still reach it: its renewals hang, it
// stops acting before its lease runs out, and a standby takes over.
TEST(FailoverCutTest, ALeaderCutOffFromPostgresStopsAndAStandbyTakesOver) {
  HaOptions o;
  o.proxy_first = true;
  auto started = HaCluster::Start(o);
  ASSERT_TRUE(started.ok()) << started.status().ToString();
  HaCluster* c = started->get();
  Load load(c);
  std::this_thread::sleep_for(std::chrono::seconds(1));
  ASSERT_EQ(c->Leader(), 0);
  c->CutFirstFromStore();
  const int st = c->WaitExit(0, 3 * kSecond);
  ASSERT_NE(st, -1) << "the cut-off leader still runs" << c->Describe();
  EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 75) << "status " << st << c->Describe();
  EXPECT_GE(c->WaitLeader(5 * kSecond), 1) << c->Describe();
  std::this_thread::sleep_for(std::chrono::seconds(2));
  ExpectRunWasCorrect(c, load);
}

}  // namespace
}  // namespace hangar::testing
