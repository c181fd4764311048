// The static --mig-layout, the reshape checks, and the fake backend's MIG instances.
#include "agent/gpu/mig_layout.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

#include "agent/gpu/fake_backend.h"

namespace hangar::agent {
namespace {

pb::MigGpuInstance Inst(const std::string& profile, uint32_t start) {
  pb::MigGpuInstance mi;
  mi.set_profile(profile);
  mi.set_start(start);
  EXPECT_TRUE(CompleteMigInstance(80 * 1024, &mi).ok()) << profile << "@" << start;
  return mi;
}

TEST(StaticMigLayout, ParsesAndPlacesLargestFirst) {
  auto l = ParseStaticMigLayout("0:1g.10gb,4g.40gb; 1:7g.80gb ;*:3g.40gb@0,2g.20gb");
  ASSERT_TRUE(l.ok()) << l.status().message();
  auto g0 = PlaceStaticMigLayout(*l, 0, 80 * 1024);
  ASSERT_TRUE(g0.ok());
  EXPECT_EQ(DescribeMigLayout(*g0), "4g.40gb@0, 1g.10gb@6");
  EXPECT_EQ(DescribeMigLayout(*PlaceStaticMigLayout(*l, 1, 80 * 1024)), "7g.80gb@0");
  EXPECT_EQ(DescribeMigLayout(*PlaceStaticMigLayout(*l, 5, 80 * 1024)), "3g.40gb@0, 2g.20gb@4");
  auto doc = ParseStaticMigLayout("0:3g.40gb,3g.40gb;1:7g.80gb;*:1g.10gb@6,2g.20gb,4g.40gb");
  ASSERT_TRUE(doc.ok());
  EXPECT_EQ(DescribeMigLayout(*PlaceStaticMigLayout(*doc, 0, 80 * 1024)), "3g.40gb@0, 3g.40gb@4");
  EXPECT_EQ(DescribeMigLayout(*PlaceStaticMigLayout(*doc, 2, 80 * 1024)),
            "4g.40gb@0, 2g.20gb@4, 1g.10gb@6");
  EXPECT_EQ(PlaceStaticMigLayout(*ParseStaticMigLayout("2:1g.10gb@0,4g.40gb"), 2, 80 * 1024)
                .status()
                .message(),
            "--mig-layout GPU 2: 4g.40gb does not fit beside 1g.10gb@0");
  EXPECT_TRUE(PlaceStaticMigLayout(*ParseStaticMigLayout("0:7g.80gb"), 1, 80 * 1024)->empty());
}

TEST(StaticMigLayout, SaysWhatIsWrong) {
  EXPECT_EQ(ParseStaticMigLayout("0:3g.41gb")
                .status()
                .message()
                .rfind("--mig-layout GPU 0: '3g.41gb' is not a MIG profile; known: ", 0),
            0u);
  EXPECT_EQ(
      ParseStaticMigLayout("3g.40gb").status().message(),
      "--mig-layout entry '3g.40gb' is not GPU:PROFILE,... (e.g. 0:3g.40gb,3g.40gb or *:7g.80gb)");
  EXPECT_EQ(ParseStaticMigLayout("0:3g.40gb@9").status().message(),
            "--mig-layout GPU 0: start '9' of 3g.40gb must be a memory slice, 0 to 7");
  EXPECT_EQ(PlaceStaticMigLayout(*ParseStaticMigLayout("0:7g.80gb,1g.10gb"), 0, 80 * 1024)
                .status()
                .message(),
            "--mig-layout GPU 0: 1g.10gb does not fit beside 7g.80gb@0");
  EXPECT_EQ(
      PlaceStaticMigLayout(*ParseStaticMigLayout("0:7g.141gb"), 0, 80 * 1024).status().message(),
      "--mig-layout GPU 0: 7g.141gb is not a profile of this GPU's part (A100/H100-80GB)");
}

TEST(MigReshapeCheck, OnlyWhatFitsAfterTheDestroys) {
  const MigLayout now = {Inst("3g.40gb", 0), Inst("3g.40gb", 4)};
  EXPECT_TRUE(
      CheckMigReshape(now, {Inst("3g.40gb", 4)}, {Inst("2g.20gb", 4), Inst("1g.10gb", 6)}).ok());
  EXPECT_EQ(CheckMigReshape(now, {}, {Inst("1g.10gb", 6)}).message(),
            "1g.10gb at slice 6 overlaps an instance that stays (the GPU has 3g.40gb@0, 3g.40gb@4) "
            "or another one "
            "to create");
  EXPECT_EQ(CheckMigReshape(now, {Inst("4g.40gb", 0)}, {}).message(),
            "the instance at slice 0 is 3g.40gb, not 4g.40gb; the GPU has 3g.40gb@0, 3g.40gb@4");
  EXPECT_EQ(CheckMigReshape(now, {Inst("1g.10gb", 2)}, {}).message(),
            "there is no 1g.10gb at slice 2 (1 memory slices) to destroy; the GPU has 3g.40gb@0, "
            "3g.40gb@4");
  pb::MigGpuInstance bad;
  bad.set_profile("3g.40gb");
  bad.set_start(2);
  EXPECT_EQ(CompleteMigInstance(80 * 1024, &bad).message(),
            "3g.40gb may start at slice 0, 4, not at 2");
  bad.set_profile("3g.71gb");
  EXPECT_EQ(CompleteMigInstance(80 * 1024, &bad).message(),
            "MIG profile '3g.71gb' is not one of A100/H100-80GB's (this GPU's part)");
}

TEST(FakeMig, KeepsALayoutWithTheDriversGeometry) {
  const std::string state =
      (std::filesystem::temp_directory_path() / ("fake_mig." + std::to_string(getpid()) + ".json"))
          .string();
  FakeGpuOptions o;
  o.count = 2;
  o.mig = true;
  o.mig_state_file = state;
  auto b = MakeFakeBackend(o, "n1", SystemClock::Default());
  ASSERT_TRUE(b.ok());
  EXPECT_EQ((*b)->Discover()->gpus[0].mig_layout_size(), 0);
  MigReshapeResult r = (*b)->ReshapeMig(0, {}, {Inst("3g.40gb", 0), Inst("3g.40gb", 4)});
  ASSERT_TRUE(r.status.ok()) << r.status.message();
  EXPECT_EQ(DescribeMigLayout(r.layout), "3g.40gb@0, 3g.40gb@4");
  const std::string uuid = r.layout[1].uuid();
  EXPECT_EQ(uuid.rfind("MIG-", 0), 0u);
  // An overlap stops the change where it is.
  r = (*b)->ReshapeMig(0, {Inst("3g.40gb", 4)}, {Inst("2g.20gb", 4), Inst("4g.40gb", 0)});
  ASSERT_FALSE(r.status.ok());
  EXPECT_EQ(DescribeMigLayout(r.layout), "3g.40gb@0, 2g.20gb@4");
  // A new backend with the same state file (an agent restart) finds the instances, same UUIDs.
  r = (*b)->ReshapeMig(0, {Inst("2g.20gb", 4)}, {Inst("3g.40gb", 4)});
  ASSERT_TRUE(r.status.ok());
  auto again = MakeFakeBackend(o, "n1", SystemClock::Default());
  auto layout = (*again)->MigLayout(0);
  ASSERT_TRUE(layout.ok());
  EXPECT_EQ(DescribeMigLayout(*layout), "3g.40gb@0, 3g.40gb@4");
  EXPECT_EQ((*layout)[1].uuid(), uuid);
  o.mig = false;
  auto whole = MakeFakeBackend(o, "n1", SystemClock::Default());
  EXPECT_EQ((*whole)->ReshapeMig(0, {}, {Inst("7g.80gb", 0)}).status.message(),
            "GPU 0 is not in MIG mode");
  std::filesystem::remove(state);
}

}  // namespace
}  // namespace hangar::agent
