#include "agent/gpu/mps.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

namespace hangar::agent {
namespace {

namespace fs = std::filesystem;

constexpr int64_t k80Gi = 80 * 1024;

TEST(MpsModeTest, ParsesTheThreeModesAndRefusesOthers) {
  EXPECT_EQ(*ParseMpsMode("auto"), MpsMode::kAuto);
  EXPECT_EQ(*ParseMpsMode("on"), MpsMode::kOn);
  EXPECT_EQ(*ParseMpsMode("off"), MpsMode::kOff);
  auto bad = ParseMpsMode("yes");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("use auto"), std::string::npos) << bad.status().message();
}

TEST(FractionalShareTest, AHalfGpuGetsHalfTheMemoryAndHalfTheThreads) {
  auto s = FractionalShare({{"HANGAR_GPU_FRACTION", "0.5"}}, 1, false, k80Gi);
  ASSERT_TRUE(s.ok() && *s) << s.status().message();
  EXPECT_EQ((*s)->milli, 500);
  EXPECT_EQ((*s)->memory_mib, 40 * 1024);
  EXPECT_EQ(ActiveThreadPercentage((*s)->milli), 50);
}

TEST(FractionalShareTest, TheGrantedMemoryWinsAndIsCappedAtTheGpu) {
  auto s = FractionalShare({{"HANGAR_GPU_FRACTION", "0.25"}, {"HANGAR_GPU_MEMORY_MIB", "20480"}}, 1,
                           false, k80Gi);
  ASSERT_TRUE(s.ok() && *s);
  EXPECT_EQ((*s)->memory_mib, 20480);
  auto big = FractionalShare({{"HANGAR_GPU_FRACTION", "0.25"}, {"HANGAR_GPU_MEMORY_MIB", "999999"}},
                             1, false, k80Gi);
  ASSERT_TRUE(big.ok() && *big);
  EXPECT_EQ((*big)->memory_mib, k80Gi);
  auto bad = FractionalShare({{"HANGAR_GPU_FRACTION", "0.25"}, {"HANGAR_GPU_MEMORY_MIB", "20Gi"}},
                             1, false, k80Gi);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("HANGAR_GPU_MEMORY_MIB '20Gi'"), std::string::npos);
}

TEST(FractionalShareTest, WholeGpusMigAndSeveralGpusAreNotFractional) {
  EXPECT_FALSE(*FractionalShare({}, 1, false, k80Gi));                              // whole GPU
  EXPECT_FALSE(*FractionalShare({{"HANGAR_GPU_FRACTION", "1"}}, 1, false, k80Gi));  // a whole share
  EXPECT_FALSE(*FractionalShare({{"HANGAR_GPU_FRACTION", "0.5"}}, 1, true, k80Gi));   // MIG
  EXPECT_FALSE(*FractionalShare({{"HANGAR_GPU_FRACTION", "0.5"}}, 2, false, k80Gi));  // two GPUs
  EXPECT_FALSE(*FractionalShare({{"HANGAR_GPU_FRACTION", "0.5"}}, 0, false, k80Gi));  // none
  EXPECT_FALSE(FractionalShare({{"HANGAR_GPU_FRACTION", "half"}}, 1, false, k80Gi).ok());
}

TEST(FractionalShareTest, ThreadPercentageRoundsUpAndStaysInRange) {
  EXPECT_EQ(ActiveThreadPercentage(333), 34);
  EXPECT_EQ(ActiveThreadPercentage(250), 25);
  EXPECT_EQ(ActiveThreadPercentage(1), 1);
  EXPECT_EQ(ActiveThreadPercentage(0), 1);
  EXPECT_EQ(ActiveThreadPercentage(999), 100);
  EXPECT_EQ(ActiveThreadPercentage(5000), 100);
}

TEST(MpsClientEnvTest, NamesTheFoldersTheLimitsAndTheGpuByUuid) {
  MpsDaemon d;
  d.uuid = "GPU-1234";
  d.pipe_dir = "/s/mps/gpu3-uid7/pipe";
  d.log_dir = "/s/mps/gpu3-uid7/log";
  std::map<std::string, std::string> env;
  for (const auto& [k, v] : MpsClientEnv(MpsShare{500, 40960}, d)) env[k] = v;
  EXPECT_EQ(env.size(), 5u);
  EXPECT_EQ(env["CUDA_MPS_PIPE_DIRECTORY"], d.pipe_dir);
  EXPECT_EQ(env["CUDA_MPS_LOG_DIRECTORY"], d.log_dir);
  EXPECT_EQ(env["CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"], "0=40960M");
  EXPECT_EQ(env["CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"], "50");
  EXPECT_EQ(env["CUDA_VISIBLE_DEVICES"], "GPU-1234");
}

class ChooseMpsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    bin_ = fs::temp_directory_path() / ("choose_mps." + std::to_string(getpid()));
    fs::create_directories(bin_);
  }
  void TearDown() override { fs::remove_all(bin_); }
  void InstallControl() {
    const fs::path p = bin_ / kMpsControlProgram;
    std::ofstream(p) << "#!/bin/sh\nexit 0\n";
    chmod(p.c_str(), 0755);
  }
  fs::path bin_;
};

TEST_F(ChooseMpsTest, FakeGpusGetTheStandIn) {
  std::string note;
  auto o = ChooseMps(MpsMode::kAuto, /*fake_backend=*/true, "/opt/h/hangar", "", bin_.string(),
                     "/state", &note);
  ASSERT_TRUE(o.ok()) << o.status().message();
  EXPECT_TRUE(o->enabled);
  EXPECT_TRUE(o->fake);
  EXPECT_EQ(o->control, (std::vector<std::string>{"/opt/h/hangar", "fake-mps-control"}));
  EXPECT_EQ(o->root, "/state/mps");
}

TEST_F(ChooseMpsTest, RealGpusUseTheInstalledDaemonOrSayWhyNot) {
  std::string note;
  auto absent =
      ChooseMps(MpsMode::kAuto, false, "/opt/h/hangar", "", bin_.string(), "/state", &note);
  ASSERT_TRUE(absent.ok());
  EXPECT_FALSE(absent->enabled);
  EXPECT_NE(note.find("nvidia-cuda-mps-control is not installed"), std::string::npos) << note;
  auto required =
      ChooseMps(MpsMode::kOn, false, "/opt/h/hangar", "", bin_.string(), "/state", &note);
  ASSERT_FALSE(required.ok());
  EXPECT_NE(required.status().message().find("--mps on"), std::string::npos);
  InstallControl();
  auto found = ChooseMps(MpsMode::kOn, false, "/opt/h/hangar", "", bin_.string(), "/state", &note);
  ASSERT_TRUE(found.ok()) << found.status().message();
  EXPECT_TRUE(found->enabled);
  EXPECT_FALSE(found->fake);
  EXPECT_EQ(found->control, (std::vector<std::string>{(bin_ / kMpsControlProgram).string()}));
}

TEST_F(ChooseMpsTest, OffIsOffEvenWithTheDaemonInstalled) {
  InstallControl();
  std::string note;
  auto o = ChooseMps(MpsMode::kOff, false, "/opt/h/hangar", "", bin_.string(), "/state", &note);
  ASSERT_TRUE(o.ok());
  EXPECT_FALSE(o->enabled);
  EXPECT_NE(note.find("--mps off"), std::string::npos);
}

}  // namespace
}  // namespace hangar::agent
