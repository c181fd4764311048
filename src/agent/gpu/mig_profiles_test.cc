#include "agent/gpu/mig_profiles.h"

#include <gtest/gtest.h>

#include "agent/gpu/fake_backend.h"
#include "common/time.h"

namespace hangar::agent {
namespace {

TEST(MigProfilesTest, NamesFollowThePart) {
  EXPECT_EQ(MigProfileName(81559, 1, 1), "1g.10gb");
  EXPECT_EQ(MigProfileName(81559, 1, 2), "1g.20gb");
  EXPECT_EQ(MigProfileName(143771, 1, 1), "1g.18gb");
  EXPECT_EQ(MigProfileName(143771, 3, 4), "3g.71gb");
  EXPECT_EQ(MigProfileName(143771, 7, 8), "7g.141gb");
  EXPECT_EQ(MigProfileName(40960, 1, 2), "1g.10gb");
  EXPECT_EQ(MigProfileName(81559, 3, 3), "");  // no such shape
}

TEST(MigProfilesTest, FakeMigGpusOfferTheTable) {
  ManualClock clock;
  FakeGpuOptions o;
  o.count = 2;
  o.memory_mib = 141 * 1024;
  o.mig = true;
  auto b = MakeFakeBackend(o, "n0", &clock);
  ASSERT_TRUE(b.ok());
  auto info = (*b)->Discover();
  ASSERT_TRUE(info.ok());
  const pb::GpuInfo& g = info->gpus[1];
  EXPECT_TRUE(g.mig());
  EXPECT_EQ(g.mig_mode(), "enabled");
  ASSERT_EQ(g.mig_profiles_size(), 6);
  EXPECT_EQ(g.mig_profiles(1).name(), "1g.35gb");
  EXPECT_EQ(
      std::vector<uint32_t>(g.mig_profiles(1).starts().begin(), g.mig_profiles(1).starts().end()),
      (std::vector<uint32_t>{0, 2, 4, 6}));
  EXPECT_EQ(g.mig_profiles(1).nvml_profile(), 9u);

  pb::Launch l;
  pb::MigInstance* mi = l.add_mig_instances();
  mi->set_gpu_index(1);
  mi->set_profile("2g.35gb");
  mi->set_start(4);
  mi->set_memory_slices(2);
  EXPECT_TRUE(CheckMigInstances(info->gpus, l).ok());
  mi->set_start(6);  // 2g starts at 0, 2 or 4
  EXPECT_EQ(CheckMigInstances(info->gpus, l).message(),
            "GPU 1 offers 2g.35gb starts at 0, 2, 4 (2 memory slices), not slice 6");
  mi->set_start(4);
  mi->set_profile("2g.20gb");  // an 80 GB part's name
  EXPECT_EQ(CheckMigInstances(info->gpus, l).message(),
            "GPU 1 has no MIG profile 2g.20gb; its GPUs' memory names another part (see `hangar "
            "gpu-check`)");
  mi->set_gpu_index(7);
  EXPECT_EQ(CheckMigInstances(info->gpus, l).code(), StatusCode::kNotFound);
}

TEST(MigProfilesTest, PlainFakeGpusAreNotMig) {
  ManualClock clock;
  auto b = MakeFakeBackend(FakeGpuOptions{}, "n0", &clock);
  ASSERT_TRUE(b.ok());
  auto info = (*b)->Discover();
  ASSERT_TRUE(info.ok());
  EXPECT_FALSE(info->gpus[0].mig());
  EXPECT_EQ(info->gpus[0].mig_profiles_size(), 0);
}

}  // namespace
}  // namespace hangar::agent
