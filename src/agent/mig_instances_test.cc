// MigInstances on its own, over the fake backend's MIG GPUs (H100 80 GB, 8 memory slices): the
// static layout at start, claims and what they block, reshapes refused whole or applied, and the
// queue applied in order.
#include "agent/mig_instances.h"

#include <gtest/gtest.h>

#include <thread>

#include "agent/gpu/fake_backend.h"

namespace hangar::agent {
namespace {

class MigInstancesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    FakeGpuOptions fake;
    fake.count = 2;
    fake.mig = true;
    auto backend = MakeFakeBackend(fake, "m1", &clock_);
    ASSERT_TRUE(backend.ok());
    backend_ = std::move(*backend);
    auto found = backend_->Discover();
    ASSERT_TRUE(found.ok());
    gpus_ = found->gpus;
    mig_ = std::make_unique<MigInstances>(backend_.get(), &clock_, "m1");
  }
  void Init(const std::string& layout, std::map<std::string, std::vector<MigSlot>> claims = {}) {
    mig_->Init(*ParseStaticMigLayout(layout), &gpus_, std::move(claims));
  }
  static pb::Launch LaunchOf(const std::string& task, const std::string& profile, uint32_t start,
                             uint32_t size) {
    pb::Launch l;
    l.set_task_id(task);
    pb::MigInstance* mi = l.add_mig_instances();
    mi->set_gpu_index(0);
    mi->set_profile(profile);
    mi->set_start(start);
    mi->set_memory_slices(size);
    return l;
  }
  static pb::MigReshape ReshapeOf(uint64_t id, uint32_t gpu,
                                  std::vector<std::tuple<std::string, uint32_t, uint32_t>> destroy,
                                  std::vector<std::pair<std::string, uint32_t>> create) {
    pb::MigReshape r;
    r.set_id(id);
    r.set_gpu_index(gpu);
    for (const auto& [p, start, size] : destroy) {
      pb::MigGpuInstance* d = r.add_destroy();
      d->set_profile(p);
      d->set_start(start);
      d->set_memory_slices(size);
    }
    for (const auto& [p, start] : create) {
      pb::MigGpuInstance* c = r.add_create();
      c->set_profile(p);
      c->set_start(start);
    }
    return r;
  }

  ManualClock clock_{1000 * kSecond};
  std::unique_ptr<GpuBackend> backend_;
  std::vector<pb::GpuInfo> gpus_;
  std::unique_ptr<MigInstances> mig_;
};

TEST_F(MigInstancesTest, TheStaticLayoutIsCreatedOnTheGpusItNames) {
  Init("0:3g.40gb,3g.40gb");
  EXPECT_EQ(DescribeMigLayout(mig_->LayoutOf(0)), "3g.40gb@0, 3g.40gb@4");
  EXPECT_TRUE(mig_->LayoutOf(1).empty()) << "the layout names GPU 0 only";
  EXPECT_TRUE(mig_->LayoutOf(7).empty()) << "no such GPU";
  EXPECT_EQ(gpus_[0].mig_layout_size(), 0) << "the layouts moved into the owner";
}

TEST_F(MigInstancesTest, AClaimGivesTheTaskItsMigDevicesAndBlocksAReshapeOfThem) {
  Init("0:3g.40gb,3g.40gb");
  auto claim = mig_->ClaimFor(LaunchOf("7.0.0", "3g.40gb", 4, 4));
  ASSERT_TRUE(claim.ok()) << claim.status().message();
  ASSERT_EQ(claim->uuids.size(), 1u);
  EXPECT_EQ(claim->devices, claim->uuids[0]);
  EXPECT_EQ(claim->devices.rfind("MIG-", 0), 0u) << claim->devices;
  EXPECT_EQ(claim->slots, (std::vector<MigSlot>{{0, 4, 4}}));

  pb::MigReshaped busy =
      mig_->Apply(ReshapeOf(1, 0, {{"3g.40gb", 4, 4}}, {{"2g.20gb", 4}, {"1g.10gb", 6}}));
  EXPECT_FALSE(busy.ok());
  EXPECT_EQ(busy.message(),
            "task 7.0.0 runs in the instance at slice 4 of GPU 0; nothing was changed");
  EXPECT_EQ(DescribeMigLayout(mig_->LayoutOf(0)), "3g.40gb@0, 3g.40gb@4") << "refused whole";

  // The other instance is free: re-cut it while the task runs.
  pb::MigReshaped done =
      mig_->Apply(ReshapeOf(2, 0, {{"3g.40gb", 0, 4}}, {{"2g.20gb", 0}, {"1g.10gb", 2}}));
  ASSERT_TRUE(done.ok()) << done.message();
  EXPECT_EQ(DescribeMigLayout(mig_->LayoutOf(0)), "2g.20gb@0, 1g.10gb@2, 3g.40gb@4");

  mig_->Release("7.0.0");
  pb::MigReshaped freed = mig_->Apply(ReshapeOf(3, 0, {{"3g.40gb", 4, 4}}, {{"3g.40gb", 4}}));
  EXPECT_TRUE(freed.ok()) << freed.message();
}

TEST_F(MigInstancesTest, AClaimOfAnInstanceThatIsNotThereSaysWhatTheGpuHas) {
  Init("0:3g.40gb,3g.40gb");
  auto claim = mig_->ClaimFor(LaunchOf("7.0.1", "2g.20gb", 0, 2));
  ASSERT_FALSE(claim.ok());
  EXPECT_EQ(claim.status().message(),
            "GPU 0 of node m1 has no MIG instance 2g.20gb at slice 0 (it has 3g.40gb@0, "
            "3g.40gb@4); the controller must create it with a MigReshape first");
  pb::Launch none;
  none.set_task_id("7.0.2");
  auto nothing = mig_->ClaimFor(none);
  ASSERT_TRUE(nothing.ok());
  EXPECT_TRUE(nothing->devices.empty()) << "a launch without MIG instances claims none";
}

TEST_F(MigInstancesTest, ClaimsKeptFromBeforeARestartStillBlockReshapes) {
  Init("0:3g.40gb,3g.40gb", {{"5.1.0", {{0, 0, 4}}}});
  pb::MigReshaped busy = mig_->Apply(ReshapeOf(1, 0, {{"3g.40gb", 0, 4}}, {{"2g.20gb", 0}}));
  EXPECT_FALSE(busy.ok());
  EXPECT_EQ(busy.message(),
            "task 5.1.0 runs in the instance at slice 0 of GPU 0; nothing was changed");
}

TEST_F(MigInstancesTest, AReshapeOfAGpuThatIsNotHereIsRefused) {
  Init("");
  pb::MigReshaped r = mig_->Apply(ReshapeOf(4, 9, {}, {{"7g.80gb", 0}}));
  EXPECT_FALSE(r.ok());
  EXPECT_EQ(r.message(), "GPU 9 is not on node m1");
  pb::MigReshaped same = mig_->Apply(ReshapeOf(5, 1, {}, {}));
  EXPECT_TRUE(same.ok());
  EXPECT_EQ(same.message(), "the GPU has that layout already");
}

TEST_F(MigInstancesTest, TheLoopAppliesQueuedReshapesInOrderAndStops) {
  Init("");
  mig_->Enqueue(ReshapeOf(1, 1, {}, {{"7g.80gb", 0}}));
  mig_->Enqueue(ReshapeOf(2, 1, {{"7g.80gb", 0, 8}}, {{"4g.40gb", 0}, {"3g.40gb", 4}}));
  std::atomic<bool> stop{false};
  std::vector<pb::MigReshaped> answers;
  std::mutex mu;
  std::condition_variable cv;
  std::thread loop([&] {
    mig_->Loop(&stop, [&](const pb::MigReshaped& a) {
      std::lock_guard<std::mutex> l(mu);
      answers.push_back(a);
      cv.notify_all();
    });
  });
  {
    std::unique_lock<std::mutex> l(mu);
    cv.wait_for(l, std::chrono::seconds(10), [&] { return answers.size() == 2; });
  }
  stop = true;
  loop.join();
  ASSERT_EQ(answers.size(), 2u);
  EXPECT_EQ(answers[0].id(), 1u);
  EXPECT_TRUE(answers[0].ok()) << answers[0].message();
  EXPECT_EQ(answers[1].id(), 2u);
  EXPECT_TRUE(answers[1].ok()) << answers[1].message();
  EXPECT_EQ(DescribeMigLayout(mig_->LayoutOf(1)), "4g.40gb@0, 3g.40gb@4");
}

}  // namespace
}  // namespace hangar::agent
