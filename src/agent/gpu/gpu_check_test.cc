#include "agent/gpu/gpu_check.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <sstream>

#include "agent/gpu/fake_backend.h"

namespace hangar::agent {
namespace {

TEST(GpuCheck, PrintsInventoryTelemetryEventsAndValidation) {
  ManualClock clock(0);
  FakeGpuOptions o;
  o.count = 2;
  o.faults_file = ::testing::TempDir() + "gpu_check_faults." + std::to_string(getpid());
  std::ofstream(o.faults_file)
      << "- {gpu: 1, kind: fall_off_bus}\n- {gpu: 0, kind: pcie_downgrade, gen: 4}\n";
  auto b = MakeFakeBackend(o, "n1", &clock);
  ASSERT_TRUE(b.ok());
  std::ostringstream out;
  Status s = RunGpuCheck(**b, true, 0, out);
  ASSERT_TRUE(s.ok()) << s.message();
  const std::string text = out.str();
  EXPECT_NE(text.find("backend fake, driver fake-570.00, CUDA 13.0, 2 GPUs"), std::string::npos)
      << text;
  EXPECT_NE(text.find("00000000:18:00.0"), std::string::npos);
  EXPECT_NE(text.find("Gen4x16 (Gen5x16)"), std::string::npos) << text;
  EXPECT_NE(text.find("check"), std::string::npos);
  EXPECT_NE(text.find("1    lost"), std::string::npos) << text;
  EXPECT_NE(text.find("event: GPU 1 xid 79"), std::string::npos) << text;
  EXPECT_NE(text.find("\"gemm_tflops\": 700.0"), std::string::npos) << text;
  std::remove(o.faults_file.c_str());
}

TEST(GpuCheck, NoGpusIsAFailure) {
  ManualClock clock(0);
  FakeGpuOptions o;
  o.count = 0;
  auto b = MakeFakeBackend(o, "n1", &clock);
  ASSERT_TRUE(b.ok());
  std::ostringstream out;
  Status s = RunGpuCheck(**b, false, 0, out);
  EXPECT_EQ(s.message(), "the fake backend found no GPUs on this machine");
}

}  // namespace
}  // namespace hangar::agent
