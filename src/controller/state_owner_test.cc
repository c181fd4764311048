// The state owner's promise on stop: what was posted before Stop() is committed, lazy rows (the
// audit log) included.
#include "controller/state_owner.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <thread>

#include "cluster/cluster_yaml.h"
#include "controller/store/state_store.h"

namespace hangar::controller {
namespace {

TEST(StateOwnerTest, StopCommitsWhatWasPostedBeforeIt) {
  const auto dir = std::filesystem::temp_directory_path() / ("hangar-owner-test-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string db = (dir / "state.db").string();
  auto f = cluster::ParseClusterYaml(
      "node_defaults: {gpus: 8, gpu_model: H100, gpu_memory: 80Gi, cpu: 64, memory: 512Gi}\nnodes: [{name: a}]\n", "c.yaml");
  ASSERT_TRUE(f.ok());
  {
    auto store = OpenSqliteStore(db);
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    ControllerOptions o;
    StateOwner owner(std::make_unique<ClusterState>(f->topology, o, sched::Scheduler::Create({}).value()),
                     std::move(*store), SystemClock::Default());
    owner.Start();
    for (int i = 0; i < 3; ++i) {
      AuditRow row;
      row.time = 1000 + i;
      row.user = "alice";
      row.method = "POST";
      row.path = "/v1/jobs";
      row.status = 201;
      owner.RecordAudit(row);  // lazy: it waits for the owner's next commit
    }
    owner.Stop();  // at once, before the next tick
  }
  auto reopened = OpenSqliteStore(db);
  ASSERT_TRUE(reopened.ok());
  auto rows = (*reopened)->Audit("alice", 10);
  ASSERT_TRUE(rows.ok());
  EXPECT_EQ(rows->size(), 3u) << "a controller stopped with SIGTERM keeps the audit rows of the calls it answered";
  reopened->reset();
  std::filesystem::remove_all(dir);
}


// A memory store whose commits take `delay` and that counts what it committed.
class SlowStore final : public StateStore {
 public:
  explicit SlowStore(std::chrono::milliseconds delay) : delay_(delay), inner_(NewMemoryStore()) {}
  Status Commit(const StoreBatch& b) override {
    in_commit_ = true;
    std::this_thread::sleep_for(delay_);
    Status s = inner_->Commit(b);
    events_ += static_cast<int>(b.events.size());
    if (!b.empty()) commits_++;
    in_commit_ = false;
    return s;
  }
  StatusOr<StoreContents> Load() override { return inner_->Load(); }
  StatusOr<std::vector<EventRow>> Events(const std::string& p, int limit) override { return inner_->Events(p, limit); }
  StatusOr<std::vector<AuditRow>> Audit(const std::string& u, int limit) override { return inner_->Audit(u, limit); }
  std::string Describe() const override { return "slow memory"; }

  std::chrono::milliseconds delay_;
  std::unique_ptr<StateStore> inner_;
  std::atomic<bool> in_commit_{false};
  std::atomic<int> events_{0}, commits_{0};
};

// While a commit is in flight the owner goes on deciding; what it decides meanwhile waits and goes
// in one commit after it, and an answer comes only once its batch, and every one before, is
// committed.
TEST(StateOwnerTest, CommitsArePipelinedMergedAndAnsweredOnlyWhenDurable) {
  auto f = cluster::ParseClusterYaml(
      "node_defaults: {gpus: 8, gpu_model: H100, gpu_memory: 80Gi, cpu: 64, memory: 512Gi}\nnodes: [{name: a}]\n", "c.yaml");
  ASSERT_TRUE(f.ok());
  auto slow = std::make_unique<SlowStore>(std::chrono::milliseconds(400));
  SlowStore* store = slow.get();
  StateOwner owner(std::make_unique<ClusterState>(f->topology, ControllerOptions{}, sched::Scheduler::Create({}).value()),
                   std::move(slow), SystemClock::Default());
  owner.Start();
  auto event = [](const std::string& what) {
    return [what](ClusterState&, Effects* fx, StateOwner::AfterCommit*) { fx->Event(1, "test", "test/x", what); };
  };
  owner.Post(event("first"));
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (!store->in_commit_ && std::chrono::steady_clock::now() < until) std::this_thread::yield();
  ASSERT_TRUE(store->in_commit_) << "the first batch's commit began";
  std::atomic<bool> ran{false};
  owner.Post([&ran](ClusterState&, Effects*, StateOwner::AfterCommit*) { ran = true; });
  for (int i = 0; i < 4; ++i) owner.Post(event("then " + std::to_string(i)));
  while (!ran && std::chrono::steady_clock::now() < until) std::this_thread::yield();
  EXPECT_TRUE(ran && store->commits_ == 0) << "the owner ran a command while the first commit was in flight";
  const int seen = owner.Call<int>([&](ClusterState&, Effects* fx) {
    fx->Event(1, "test", "test/x", "last");
    return 0;
  });
  (void)seen;
  EXPECT_EQ(store->events_, 6) << "answered only once its own event, and all before it, were committed";
  EXPECT_EQ(store->commits_, 2) << "what waited behind the first commit went in one";
  owner.Stop();
}

}  // namespace
}  // namespace hangar::controller
