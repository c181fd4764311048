// The commit pipeline on its own (committer.h): batches committed in the order handed, those that
// waited behind a commit merged into one, answers after the commit, messages only for committed
// batches, and after a failed commit every later batch refused without touching the store.
#include "controller/committer.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <thread>

namespace hangar::controller {
namespace {

using namespace std::chrono_literals;

// A memory store whose commits take `delay`, fail while `fail` is set, and are counted.
class FlakyStore final : public StateStore {
 public:
  explicit FlakyStore(std::chrono::milliseconds delay) : delay_(delay), inner_(NewMemoryStore()) {}
  Status Commit(const StoreBatch& b) override {
    in_commit_ = true;
    std::this_thread::sleep_for(delay_);
    in_commit_ = false;
    asked_++;
    if (fail_) return Status::Unavailable("the store's disk is full");
    events_ += static_cast<int>(b.events.size());
    return inner_->Commit(b);
  }
  StatusOr<StoreContents> Load() override { return inner_->Load(); }
  StatusOr<std::vector<EventRow>> Events(const std::string& p, int limit) override {
    return inner_->Events(p, limit);
  }
  StatusOr<std::vector<AuditRow>> Audit(const std::string& u, int limit) override {
    return inner_->Audit(u, limit);
  }
  std::string Describe() const override { return "flaky memory"; }

  std::chrono::milliseconds delay_;
  std::unique_ptr<StateStore> inner_;
  std::atomic<bool> in_commit_{false}, fail_{false};
  std::atomic<int> asked_{0}, events_{0};
};

class Sent final : public MessageSink {
 public:
  void Send(const std::string& node, pb::ControllerMessage) override {
    std::lock_guard<std::mutex> l(mu_);
    nodes_.push_back(node);
  }
  std::vector<std::string> nodes() {
    std::lock_guard<std::mutex> l(mu_);
    return nodes_;
  }

 private:
  std::mutex mu_;
  std::vector<std::string> nodes_;
};

StoreBatch EventBatch(const std::string& what) {
  StoreBatch b;
  b.events.push_back({0, 1, "test", "test/x", what});
  return b;
}

std::vector<Outgoing> MessageTo(const std::string& node) {
  std::vector<Outgoing> out(1);
  out[0].node = node;
  return out;
}

TEST(CommitterTest, BatchesWaitingBehindACommitGoInOneAndAreAnsweredAfterIt) {
  auto owned = std::make_unique<FlakyStore>(200ms);
  FlakyStore* store = owned.get();
  Committer c(std::move(owned));
  Sent sent;
  c.set_sink(&sent);
  c.Start();
  std::vector<std::string> answered;
  std::mutex mu;
  auto answer = [&](std::string what) {
    return Committer::AfterCommit{[&, what] {
      std::lock_guard<std::mutex> l(mu);
      EXPECT_TRUE(c.batch_failure().ok());
      EXPECT_EQ(store->events_, store->asked_ == 1 ? 1 : 4) << what << " is answered once durable";
      answered.push_back(what);
    }};
  };
  c.Hand(EventBatch("first"), answer("first"), MessageTo("n-1"));
  const auto until = std::chrono::steady_clock::now() + 5s;
  while (!store->in_commit_ && std::chrono::steady_clock::now() < until) std::this_thread::yield();
  ASSERT_TRUE(store->in_commit_);
  for (const char* what : {"a", "b", "c"}) c.Hand(EventBatch(what), answer(what), MessageTo(what));
  c.Stop();  // commits everything handed, then ends
  EXPECT_EQ(answered, (std::vector<std::string>{"first", "a", "b", "c"}));
  EXPECT_EQ(store->asked_, 2) << "the three that waited went in one commit";
  EXPECT_EQ(c.commits(), 2);
  EXPECT_EQ(sent.nodes(), (std::vector<std::string>{"n-1", "a", "b", "c"}));
  auto events =
      c.Read<StatusOr<std::vector<EventRow>>>([](StateStore& s) { return s.Events("test/", 10); });
  ASSERT_TRUE(events.ok());
  EXPECT_EQ(events->size(), 4u);
}

TEST(CommitterTest, AfterAFailedCommitEveryLaterBatchIsRefusedAndNothingIsSent) {
  auto owned = std::make_unique<FlakyStore>(0ms);
  FlakyStore* store = owned.get();
  Committer c(std::move(owned));
  Sent sent;
  c.set_sink(&sent);
  c.Start();
  store->fail_ = true;
  std::vector<std::string> failures;
  std::mutex mu;
  auto record = Committer::AfterCommit{[&] {
    std::lock_guard<std::mutex> l(mu);
    failures.push_back(c.batch_failure().message());
  }};
  c.Hand(EventBatch("lost"), record, MessageTo("n-1"));
  const auto until = std::chrono::steady_clock::now() + 5s;
  while (c.failure().ok() && std::chrono::steady_clock::now() < until) std::this_thread::yield();
  EXPECT_EQ(c.failure().message(), "the store's disk is full");
  store->fail_ = false;  // room again: still nothing after the failure may count
  c.Hand(EventBatch("after"), record, MessageTo("n-2"));
  c.Stop();
  EXPECT_EQ(failures,
            (std::vector<std::string>{"the store's disk is full", "the store's disk is full"}));
  EXPECT_EQ(store->asked_, 1) << "the batch built on the failed one never reached the store";
  EXPECT_TRUE(sent.nodes().empty()) << "agents are told nothing that was not committed";
  EXPECT_EQ(c.commits(), 0);
}

}  // namespace
}  // namespace hangar::controller
