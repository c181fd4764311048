#include "agent/gpu/fake_backend.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

namespace hangar::agent {
namespace {

constexpr Time kStart = 1'000'000;

class FakeBackendTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ =
        std::filesystem::temp_directory_path() / ("fake_backend_test." + std::to_string(getpid()));
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::unique_ptr<GpuBackend> Make(const std::string& faults, int count = 4) {
    FakeGpuOptions o;
    o.count = count;
    if (!faults.empty()) {
      o.faults_file = (dir_ / "faults.yaml").string();
      std::ofstream(o.faults_file) << faults;
    }
    auto b = MakeFakeBackend(o, "n1", &clock_);
    EXPECT_TRUE(b.ok()) << b.status().message();
    return b.ok() ? std::move(*b) : nullptr;
  }
  pb::GpuTelemetry At(GpuBackend& b, Duration since_start, int gpu) {
    clock_.Set(kStart + since_start);
    auto s = b.Sample(clock_.Now());
    EXPECT_TRUE(s.ok());
    return (*s)[static_cast<size_t>(gpu)];
  }
  std::vector<pb::GpuEvent> Events(GpuBackend& b, Duration since_start) {
    clock_.Set(kStart + since_start);
    return b.PollEvents(clock_.Now());
  }
  nlohmann::json Validation(GpuBackend& b, Duration since_start) {
    clock_.Set(kStart + since_start);
    auto v = b.Validate();
    EXPECT_TRUE(v.ok());
    return nlohmann::json::parse(*v);
  }

  ManualClock clock_{kStart};
  std::filesystem::path dir_;
};

TEST_F(FakeBackendTest, HealthyGpusDiscoverAndSample) {
  auto b = Make("");
  auto info = b->Discover();
  ASSERT_TRUE(info.ok());
  ASSERT_EQ(info->gpus.size(), 4u);
  EXPECT_EQ(info->gpus[1].pci_bus_id(), "00000000:28:00.0");
  EXPECT_EQ(info->gpus[3].numa_node(), 1);
  EXPECT_EQ(info->gpus[0].nvlink_peers_size(), 3);
  EXPECT_EQ(info->gpus[0].topology_level_size(), 4);
  auto t = At(*b, kHour, 2);
  EXPECT_FALSE(t.lost());
  EXPECT_EQ(t.pcie_gen(), 5u);
  EXPECT_EQ(t.pcie_width_max(), 16u);
  EXPECT_EQ(t.ecc_dbe_volatile(), 0u);
  EXPECT_EQ(t.clock_event_reasons(), 0x1u);  // idle
  EXPECT_EQ(t.energy_mj(), 70000u * 3600);   // 70 W for an hour
  EXPECT_TRUE(Events(*b, kHour).empty());
}

TEST_F(FakeBackendTest, XidFiresOnceAtItsTime) {
  auto b = Make("- {at: 30s, gpu: 3, kind: xid, code: 79}\n");
  EXPECT_TRUE(Events(*b, 29 * kSecond).empty());
  auto e = Events(*b, 30 * kSecond);
  ASSERT_EQ(e.size(), 1u);
  EXPECT_EQ(e[0].index(), 3u);
  EXPECT_EQ(e[0].kind(), "xid");
  EXPECT_EQ(e[0].code(), 79u);
  EXPECT_EQ(e[0].time_ms(), kStart + 30 * kSecond);
  EXPECT_TRUE(Events(*b, 31 * kSecond).empty());
}

TEST_F(FakeBackendTest, ThermalThrottleRisesWhileActiveAndEnds) {
  auto b = Make("- {at: 10s, gpu: 1, kind: thermal_throttle, duration: 60s}\n");
  EXPECT_EQ(At(*b, 5 * kSecond, 1).thermal_violation_ms(), 0u);
  auto t = At(*b, 40 * kSecond, 1);
  EXPECT_TRUE(t.clock_event_reasons() & 0x40);
  EXPECT_EQ(t.thermal_violation_ms(), 30000u);
  EXPECT_EQ(t.hw_slowdown_events(), 4u);
  EXPECT_GE(t.temperature_c(), 90u);
  EXPECT_FALSE(At(*b, 40 * kSecond, 0).clock_event_reasons() & 0x40);  // only GPU 1
  t = At(*b, 100 * kSecond, 1);
  EXPECT_FALSE(t.clock_event_reasons() & 0x40);
  EXPECT_EQ(t.thermal_violation_ms(), 60000u);  // counters never go back
  EXPECT_EQ(t.hw_slowdown_events(), 7u);
}

TEST_F(FakeBackendTest, PcieDowngradeLowersTheLinkButNotItsMaximum) {
  auto b = Make("- {at: 1m, gpu: 0, kind: pcie_downgrade, gen: 3, width: 4}\n");
  EXPECT_EQ(At(*b, 0, 0).pcie_gen(), 5u);
  auto t = At(*b, kMinute, 0);
  EXPECT_EQ(t.pcie_gen(), 3u);
  EXPECT_EQ(t.pcie_width(), 4u);
  EXPECT_EQ(t.pcie_gen_max(), 5u);
  EXPECT_EQ(t.pcie_width_max(), 16u);
}

TEST_F(FakeBackendTest, EccCountersRiseAndDoubleBitErrorsSendAnEvent) {
  auto b = Make(
      "- {at: 5s, gpu: 2, kind: ecc_sbe, count: 5}\n"
      "- {at: 10s, gpu: 2, kind: ecc_dbe, count: 2}\n"
      "- {at: 20s, gpu: 2, kind: ecc_sbe, count: 1}\n");
  EXPECT_EQ(At(*b, 6 * kSecond, 2).ecc_sbe_volatile(), 5u);
  auto t = At(*b, 30 * kSecond, 2);
  EXPECT_EQ(t.ecc_sbe_volatile(), 6u);
  EXPECT_EQ(t.ecc_dbe_volatile(), 2u);
  auto e = Events(*b, 30 * kSecond);
  ASSERT_EQ(e.size(), 1u);
  EXPECT_EQ(e[0].kind(), "ecc_dbe");
  EXPECT_EQ(e[0].code(), 2u);
}

TEST_F(FakeBackendTest, NodeWideNvlinkDown) {
  auto b = Make("- {at: 1s, node: true, kind: nvlink_down, duration: 10s}\n");
  for (int g = 0; g < 4; ++g) EXPECT_EQ(At(*b, 2 * kSecond, g).nvlink_down(), 1u);
  EXPECT_EQ(At(*b, 11 * kSecond, 3).nvlink_down(), 0u);
}

TEST_F(FakeBackendTest, FallingOffTheBusLosesTheGpuForGood) {
  auto b = Make("- {at: 1m, gpu: 1, kind: fall_off_bus}\n");
  auto t = At(*b, 2 * kMinute, 1);
  EXPECT_TRUE(t.lost());
  EXPECT_EQ(t.index(), 1u);
  EXPECT_EQ(t.pcie_gen(), 0u);  // a lost GPU answers nothing else
  EXPECT_FALSE(At(*b, 2 * kMinute, 0).lost());
  auto e = Events(*b, 2 * kMinute);
  ASSERT_EQ(e.size(), 1u);
  EXPECT_EQ(e[0].code(), 79u);
  auto v = Validation(*b, 2 * kMinute);
  EXPECT_TRUE(v["gpus"][1].contains("error"));
  EXPECT_EQ(v["nccl"], "failed: GPU 1 is lost");
  EXPECT_FALSE(v.contains("nccl_busbw_gbs"));
}

TEST_F(FakeBackendTest, SlowScalesValidationWhileActive) {
  auto b = Make("- {at: 1m, gpu: 2, kind: slow, factor: 0.7, duration: 10m}\n");
  auto v = Validation(*b, 0);
  EXPECT_DOUBLE_EQ(v["gpus"][2]["gemm_tflops"].get<double>(), kFakeGemmTflops);
  EXPECT_DOUBLE_EQ(v["nccl_busbw_gbs"].get<double>(), kFakeNcclBusBwGbs);
  v = Validation(*b, 2 * kMinute);
  EXPECT_DOUBLE_EQ(v["gpus"][2]["gemm_tflops"].get<double>(), kFakeGemmTflops * 0.7);
  EXPECT_DOUBLE_EQ(v["gpus"][2]["mem_bw_gbs"].get<double>(), kFakeMemBwGbs * 0.7);
  EXPECT_DOUBLE_EQ(v["gpus"][2]["h2d_gbs"].get<double>(), kFakeHostLinkGbs * 0.7);
  EXPECT_DOUBLE_EQ(v["gpus"][1]["gemm_tflops"].get<double>(), kFakeGemmTflops);
  EXPECT_DOUBLE_EQ(v["nccl_busbw_gbs"].get<double>(), kFakeNcclBusBwGbs * 0.7);
  EXPECT_EQ(v["driver"], "fake-570.00");
  EXPECT_DOUBLE_EQ(Validation(*b, 20 * kMinute)["gpus"][2]["gemm_tflops"].get<double>(),
                   kFakeGemmTflops);
  // Its telemetry shows why: the slow GPU's SM clock is the factor of the others' while it lasts.
  const uint32_t normal = At(*b, 2 * kMinute, 1).sm_clock_mhz();
  EXPECT_EQ(At(*b, 2 * kMinute, 2).sm_clock_mhz(), static_cast<uint32_t>(normal * 0.7));
  EXPECT_EQ(At(*b, 20 * kMinute, 2).sm_clock_mhz(), At(*b, 20 * kMinute, 1).sm_clock_mhz());
}

TEST_F(FakeBackendTest, InjectedFaultsCountFromWhenTheyArrive) {
  auto b = Make("");
  const std::string path = (dir_ / "inject.yaml").string();
  std::ofstream(path) << "- {at: 10s, gpu: 0, kind: xid, code: 48}\n";
  clock_.Set(kStart + kHour);
  ASSERT_TRUE(b->InjectFaultFile(path, clock_.Now()).ok());
  EXPECT_TRUE(Events(*b, kHour + 9 * kSecond).empty());
  ASSERT_EQ(Events(*b, kHour + 10 * kSecond).size(), 1u);
  std::ofstream(path) << "- {gpu: 9, kind: xid, code: 48}\n";
  Status s = b->InjectFaultFile(path, clock_.Now());
  EXPECT_EQ(s.message(), path + ":1: gpu 9 does not exist: this node has 4 GPUs (0-3)");
}

TEST_F(FakeBackendTest, BadFaultFileFailsTheBackend) {
  FakeGpuOptions o;
  o.faults_file = (dir_ / "bad.yaml").string();
  std::ofstream(o.faults_file)
      << "faults:\n  - {gpu: 0, kind: xid, code: 79}\n  - {gpu: 0, kind: boom}\n";
  auto b = MakeFakeBackend(o, "n1", &clock_);
  ASSERT_FALSE(b.ok());
  EXPECT_EQ(b.status().message().rfind(o.faults_file + ":3: unknown fault kind 'boom'", 0), 0u)
      << b.status().message();
}

TEST_F(FakeBackendTest, SingleGpuHasNoAllReduce) {
  auto v = Validation(*Make("", 1), 0);
  EXPECT_EQ(v["nccl"], "single GPU");
  EXPECT_EQ(v["gpus"].size(), 1u);
}

}  // namespace
}  // namespace hangar::agent
