// The state owner's promise on stop: what was posted before Stop() is committed, lazy rows (the
// audit log) included.
#include "controller/state_owner.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sched.h>
#include <sys/mount.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <thread>

#include "cluster/cluster_yaml.h"
#include "controller/store/state_store.h"

namespace hangar::controller {
namespace {

TEST(StateOwnerTest, StopCommitsWhatWasPostedBeforeIt) {
  const auto dir =
      std::filesystem::temp_directory_path() / ("hangar-owner-test-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string db = (dir / "state.db").string();
  auto f = cluster::ParseClusterYaml(
      "node_defaults: {gpus: 8, gpu_model: H100, gpu_memory: 80Gi, cpu: 64, memory: 512Gi}\nnodes: "
      "[{name: a}]\n",
      "c.yaml");
  ASSERT_TRUE(f.ok());
  {
    auto store = OpenSqliteStore(db);
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    ControllerOptions o;
    StateOwner owner(
        std::make_unique<ClusterState>(f->topology, o, sched::Scheduler::Create({}).value()),
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
  EXPECT_EQ(rows->size(), 3u)
      << "a controller stopped with SIGTERM keeps the audit rows of the calls it answered";
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
  StatusOr<std::vector<EventRow>> Events(const std::string& p, int limit) override {
    return inner_->Events(p, limit);
  }
  StatusOr<std::vector<AuditRow>> Audit(const std::string& u, int limit) override {
    return inner_->Audit(u, limit);
  }
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
      "node_defaults: {gpus: 8, gpu_model: H100, gpu_memory: 80Gi, cpu: 64, memory: 512Gi}\nnodes: "
      "[{name: a}]\n",
      "c.yaml");
  ASSERT_TRUE(f.ok());
  auto slow = std::make_unique<SlowStore>(std::chrono::milliseconds(400));
  SlowStore* store = slow.get();
  StateOwner owner(std::make_unique<ClusterState>(f->topology, ControllerOptions{},
                                                  sched::Scheduler::Create({}).value()),
                   std::move(slow), SystemClock::Default());
  owner.Start();
  auto event = [](const std::string& what) {
    return [what](ClusterState&, Effects* fx, StateOwner::AfterCommit*) {
      fx->Event(1, "test", "test/x", what);
    };
  };
  owner.Post(event("first"));
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (!store->in_commit_ && std::chrono::steady_clock::now() < until) std::this_thread::yield();
  ASSERT_TRUE(store->in_commit_) << "the first batch's commit began";
  std::atomic<bool> ran{false};
  owner.Post([&ran](ClusterState&, Effects*, StateOwner::AfterCommit*) { ran = true; });
  for (int i = 0; i < 4; ++i) owner.Post(event("then " + std::to_string(i)));
  while (!ran && std::chrono::steady_clock::now() < until) std::this_thread::yield();
  EXPECT_TRUE(ran && store->commits_ == 0)
      << "the owner ran a command while the first commit was in flight";
  const int seen = owner.Call<int>([&](ClusterState&, Effects* fx) {
    fx->Event(1, "test", "test/x", "last");
    return 0;
  });
  (void)seen;
  EXPECT_EQ(store->events_, 6)
      << "answered only once its own event, and all before it, were committed";
  EXPECT_EQ(store->commits_, 2) << "what waited behind the first commit went in one";
  owner.Stop();
}

// A commit that fails because the store's disk is full (a real one: a 512 KiB tmpfs in a mount
// namespace of this test's own) is answered with the store's sentence; nothing of it, or of what
// came after it, counts, and the owner says it failed instead of killing the process.
TEST(StateOwnerTest, AFullDiskAnswersTheCallersAndStopsCommitting) {
  ASSERT_EQ(::unshare(CLONE_NEWNS), 0)
      << "needs root (a private mount namespace): " << std::strerror(errno);
  ASSERT_EQ(::mount("none", "/", nullptr, MS_REC | MS_PRIVATE, nullptr), 0);
  const auto dir =
      std::filesystem::temp_directory_path() / ("hangar-owner-full-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  ASSERT_EQ(::mount("owner-full", dir.c_str(), "tmpfs", 0, "size=512k"), 0) << std::strerror(errno);
  const std::string url = "sqlite://" + (dir / "state.db").string();
  auto f = cluster::ParseClusterYaml(
      "node_defaults: {gpus: 8, gpu_model: H100, gpu_memory: 80Gi, cpu: 64, memory: 512Gi}\nnodes: "
      "[{name: a}]\n",
      "c.yaml");
  ASSERT_TRUE(f.ok());
  {
    auto store = OpenStore(url);
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    ASSERT_TRUE((*store)->Load().ok());
    StateOwner owner(std::make_unique<ClusterState>(f->topology, ControllerOptions{},
                                                    sched::Scheduler::Create({}).value()),
                     std::move(*store), SystemClock::Default());
    owner.Start();
    {  // fill the disk
      const int fd = ::open((dir / "filler").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
      const std::string block(4096, 'f');
      while (fd >= 0 && ::write(fd, block.data(), block.size()) > 0) {
      }
      ::close(fd);
    }
    const Status answer = owner.Call<Status>([](ClusterState&, Effects* fx) {
      fx->Event(1, "test", "test/big", std::string(256 * 1024, 'e'));  // needs new pages
      return Status::Ok();
    });
    EXPECT_EQ(answer.code(), StatusCode::kUnavailable) << answer.ToString();
    EXPECT_EQ(
        answer.message().rfind(
            "the store's disk is full: free space on owner-full (mounted at " + dir.string(), 0),
        0u)
        << answer.message();
    EXPECT_NE(answer.message().find("; nothing was accepted"), std::string::npos)
        << answer.message();
    EXPECT_FALSE(owner.failure().ok()) << "the controller is told to stop";
    std::filesystem::remove(dir / "filler");
    EXPECT_THROW(owner.Call<int>([](ClusterState&, Effects* fx) {
      fx->Event(1, "test", "test/after", "built on a state the store does not have");
      return 0;
    }),
                 StoreCommitRefused)
        << "nothing after the failed commit counts, even once there is room";
    owner.Stop();
  }
  auto reopened = OpenStore(url);
  ASSERT_TRUE(reopened.ok()) << reopened.status().ToString();
  auto events = (*reopened)->Events("test/", 10);
  ASSERT_TRUE(events.ok());
  EXPECT_TRUE(events->empty()) << "nothing of the refused commits was written";
  reopened->reset();
  ::umount2(dir.c_str(), MNT_DETACH);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace hangar::controller
