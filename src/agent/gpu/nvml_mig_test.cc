// MIG reshapes through the NVML backend against the test double (tests/nvml_double/): the exact
// NVML calls made, the geometry the double enforces as the driver does, and errors mid-way.
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <sstream>

#include "agent/gpu/mig_layout.h"
#include "agent/gpu/nvml_backend.h"
#include "nvml_double_control.h"

namespace hangar::agent {
namespace {

struct Double {
  Double() : handle(dlopen(NVML_DOUBLE, RTLD_NOW | RTLD_LOCAL)) {
    configure = reinterpret_cast<nvmlDoubleConfigure_fn>(dlsym(handle, "nvmlDoubleConfigure"));
    log = reinterpret_cast<nvmlDoubleCallLog_fn>(dlsym(handle, "nvmlDoubleCallLog"));
    clear = reinterpret_cast<nvmlDoubleClearCallLog_fn>(dlsym(handle, "nvmlDoubleClearCallLog"));
  }
  ~Double() { dlclose(handle); }
  // The calls that change instances, in order, with their arguments.
  std::vector<std::string> Changes() {
    std::vector<std::string> out;
    std::stringstream in(log());
    for (std::string line; std::getline(in, line);) {
      if (line.find("Create") != std::string::npos || line.find("Destroy") != std::string::npos)
        out.push_back(line);
    }
    return out;
  }
  void* handle;
  nvmlDoubleConfigure_fn configure;
  nvmlDoubleCallLog_fn log;
  nvmlDoubleClearCallLog_fn clear;
};

pb::MigGpuInstance Inst(const std::string& profile, uint32_t start) {
  pb::MigGpuInstance mi;
  mi.set_profile(profile);
  mi.set_start(start);
  EXPECT_TRUE(CompleteMigInstance(80 * 1024, &mi).ok()) << profile << "@" << start;
  return mi;
}

class NvmlMigTest : public ::testing::Test {
 protected:
  void Start(const std::string& gpu0) {
    ASSERT_EQ(d_.configure((R"({"gpus": [)" + gpu0 + "]}").c_str()), 0);
    auto b = MakeNvmlBackend(NvmlOptions{.library = NVML_DOUBLE, .kernel_log = ""});
    ASSERT_TRUE(b.ok()) << b.status().message();
    backend_ = std::move(*b);
    auto info = backend_->Discover();
    ASSERT_TRUE(info.ok());
    discovered_ = MigLayout(info->gpus[0].mig_layout().begin(), info->gpus[0].mig_layout().end());
    d_.clear();
  }
  Double d_;
  std::unique_ptr<GpuBackend> backend_;
  MigLayout discovered_;
};

TEST_F(NvmlMigTest, CreatesOnAnEmptyGpu) {
  Start(R"({"mig": 1})");
  EXPECT_TRUE(discovered_.empty());
  MigReshapeResult r = backend_->ReshapeMig(0, {}, {Inst("3g.40gb", 4), Inst("1g.10gb", 0)});
  ASSERT_TRUE(r.status.ok()) << r.status.message();
  EXPECT_EQ(d_.Changes(),
            (std::vector<std::string>{
                "nvmlDeviceCreateGpuInstanceWithPlacement(gpu=0, profileId=9, start=4, size=4)",
                "nvmlGpuInstanceCreateComputeInstance(gpu=0, gi=1, profileId=2)",
                "nvmlDeviceCreateGpuInstanceWithPlacement(gpu=0, profileId=19, start=0, size=1)",
                "nvmlGpuInstanceCreateComputeInstance(gpu=0, gi=2, profileId=0)"}));
  ASSERT_EQ(r.layout.size(), 2u);
  EXPECT_EQ(DescribeMigLayout(r.layout), "1g.10gb@0, 3g.40gb@4");
  EXPECT_EQ(r.layout[1].compute_slices(), 3u);
  EXPECT_EQ(r.layout[1].memory_slices(), 4u);
  EXPECT_EQ(r.layout[1].nvml_profile(), 2u);
  EXPECT_EQ(r.layout[1].uuid().rfind("MIG-", 0), 0u) << r.layout[1].uuid();
  EXPECT_NE(r.layout[0].uuid(), r.layout[1].uuid());
  auto again = backend_->MigLayout(0);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(DescribeMigLayout(*again), "1g.10gb@0, 3g.40gb@4");
  EXPECT_EQ((*again)[1].uuid(), r.layout[1].uuid());
}

TEST_F(NvmlMigTest, DestroysComputeInstancesFirstThenCreates) {
  Start(R"({"mig": 1, "mig_instances": [{"profile": 2, "start": 0}, {"profile": 2, "start": 4}]})");
  EXPECT_EQ(DescribeMigLayout(discovered_), "3g.40gb@0, 3g.40gb@4");
  EXPECT_FALSE(discovered_[0].uuid().empty());
  MigReshapeResult r =
      backend_->ReshapeMig(0, {Inst("3g.40gb", 4)}, {Inst("2g.20gb", 4), Inst("1g.20gb", 6)});
  ASSERT_TRUE(r.status.ok()) << r.status.message();
  EXPECT_EQ(
      d_.Changes(),
      (std::vector<std::string>{
          "nvmlComputeInstanceDestroy(gpu=0, gi=2, ci=0)", "nvmlGpuInstanceDestroy(gpu=0, gi=2)",
          "nvmlDeviceCreateGpuInstanceWithPlacement(gpu=0, profileId=14, start=4, size=2)",
          "nvmlGpuInstanceCreateComputeInstance(gpu=0, gi=2, profileId=1)",
          "nvmlDeviceCreateGpuInstanceWithPlacement(gpu=0, profileId=15, start=6, size=2)",
          "nvmlGpuInstanceCreateComputeInstance(gpu=0, gi=3, profileId=0)"}));
  EXPECT_EQ(DescribeMigLayout(r.layout), "3g.40gb@0, 2g.20gb@4, 1g.20gb@6");
  EXPECT_EQ(r.layout[0].uuid(), discovered_[0].uuid());  // the instance that stayed
}

TEST_F(NvmlMigTest, TheDriverRefusesAnOverlap) {
  Start(R"({"mig": 1, "mig_instances": [{"profile": 2, "start": 4}]})");
  MigReshapeResult r = backend_->ReshapeMig(0, {}, {Inst("4g.40gb", 0), Inst("1g.10gb", 4)});
  ASSERT_FALSE(r.status.ok());
  EXPECT_EQ(
      r.status.message(),
      "GPU 0: nvmlDeviceCreateGpuInstanceWithPlacement(1g.10gb at slice 4, profile id 19) failed: "
      "Insufficient Resources (23)");
  EXPECT_EQ(DescribeMigLayout(r.layout), "4g.40gb@0, 3g.40gb@4");  // the 4g went in before
}

TEST_F(NvmlMigTest, TheDriverRefusesAStartTheProfileDoesNotAllow) {
  Start(R"({"mig": 1})");
  pb::MigGpuInstance bad = Inst("3g.40gb", 0);
  bad.set_start(2);  // 3g starts at 0 or 4 only
  MigReshapeResult r = backend_->ReshapeMig(0, {}, {bad});
  ASSERT_FALSE(r.status.ok());
  EXPECT_EQ(
      r.status.message(),
      "GPU 0: nvmlDeviceCreateGpuInstanceWithPlacement(3g.40gb at slice 2, profile id 9) failed: "
      "Invalid Argument (2)");
  EXPECT_TRUE(r.layout.empty());
}

TEST_F(NvmlMigTest, AnErrorMidWayStopsAndReportsTheLayoutAsItIs) {
  Start(R"({"mig": 1, "mig_instances": [{"profile": 0, "start": 4}, {"profile": 0, "start": 5}],
            "fail_after": {"nvmlGpuInstanceCreateComputeInstance": [0, 23]}})");
  MigReshapeResult r =
      backend_->ReshapeMig(0, {Inst("1g.10gb", 4), Inst("1g.10gb", 5)}, {Inst("2g.20gb", 4)});
  ASSERT_FALSE(r.status.ok());
  EXPECT_EQ(r.status.message(),
            "GPU 0: nvmlGpuInstanceCreateComputeInstance(2g.20gb at slice 4) failed: Insufficient "
            "Resources (23)");
  EXPECT_EQ(
      d_.Changes(),
      (std::vector<std::string>{
          "nvmlComputeInstanceDestroy(gpu=0, gi=1, ci=0)", "nvmlGpuInstanceDestroy(gpu=0, gi=1)",
          "nvmlComputeInstanceDestroy(gpu=0, gi=2, ci=0)", "nvmlGpuInstanceDestroy(gpu=0, gi=2)",
          "nvmlDeviceCreateGpuInstanceWithPlacement(gpu=0, profileId=14, start=4, size=2)",
          // a call the double fails on cue is logged by name only
          "nvmlGpuInstanceCreateComputeInstance"}));
  // The GPU instance exists without a compute instance: reported, with no MIG device.
  ASSERT_EQ(r.layout.size(), 1u);
  EXPECT_EQ(DescribeMigLayout(r.layout), "2g.20gb@4");
  EXPECT_EQ(r.layout[0].uuid(), "");
}

TEST_F(NvmlMigTest, AGpuInstanceWithComputeInstancesIsInUse) {
  Start(R"({"mig": 1, "mig_instances": [{"profile": 4, "start": 0}],
            "fail": {"nvmlComputeInstanceDestroy": 19}})");
  MigReshapeResult r = backend_->ReshapeMig(0, {Inst("7g.80gb", 0)}, {Inst("4g.40gb", 0)});
  ASSERT_FALSE(r.status.ok());
  EXPECT_EQ(r.status.message(),
            "GPU 0: nvmlComputeInstanceDestroy(compute instance 0 of 7g.80gb at slice 0) failed: "
            "In use by another "
            "client (19)");
  EXPECT_EQ(DescribeMigLayout(r.layout), "7g.80gb@0");
}

}  // namespace
}  // namespace hangar::agent
