// The NVML backend against the test doubles of libnvidia-ml.so.1 (tests/nvml_double/).
#include "agent/gpu/nvml_backend.h"

#include <dlfcn.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "agent/gpu/mig_profiles.h"
#include "agent/gpu/nvml_types.h"
#include "nvml_double_control.h"

namespace hangar::agent {
namespace {

namespace fs = std::filesystem;

// One loaded double and its control functions. Each build of the double is a library of its
// own, with its own scripted machine.
struct Double {
  explicit Double(const char* path) : handle(dlopen(path, RTLD_NOW | RTLD_LOCAL)) {
    EXPECT_NE(handle, nullptr) << dlerror();
    configure = reinterpret_cast<nvmlDoubleConfigure_fn>(dlsym(handle, "nvmlDoubleConfigure"));
    push_event = reinterpret_cast<nvmlDoublePushEvent_fn>(dlsym(handle, "nvmlDoublePushEvent"));
    calls = reinterpret_cast<nvmlDoubleCalls_fn>(dlsym(handle, "nvmlDoubleCalls"));
  }
  ~Double() { dlclose(handle); }
  void Configure(const std::string& json) { ASSERT_EQ(configure(json.c_str()), 0) << json; }

  void* handle;
  nvmlDoubleConfigure_fn configure;
  nvmlDoublePushEvent_fn push_event;
  nvmlDoubleCalls_fn calls;
};

class NvmlBackendTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("nvml_backend_test." + std::to_string(getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::unique_ptr<GpuBackend> Make(const char* library, NvmlOptions o = {}) {
    o.library = library;
    if (o.kernel_log == "/dev/kmsg") o.kernel_log = "";
    auto b = MakeNvmlBackend(o);
    EXPECT_TRUE(b.ok()) << b.status().message();
    return b.ok() ? std::move(*b) : nullptr;
  }
  std::string WriteScript(const std::string& name, const std::string& body) {
    const std::string path = (dir_ / name).string();
    std::ofstream(path) << "#!/bin/sh\n" << body << "\n";
    chmod(path.c_str(), 0755);
    return path;
  }

  fs::path dir_;
};

constexpr char kFourGpus[] = R"({
  "driver": "570.86.15", "cuda": 12080,
  "gpus": [
    {"util": 87, "mem_util": 40, "memory_used": 42949672960, "temperature": 71, "power_mw": 650000,
     "energy_mj": 123456, "sm_clock": 1980, "clock_reasons": 68, "pcie_gen": 4, "pcie_width": 8,
     "pcie_replay": 12, "ecc_sbe": 3, "ecc_dbe": 1, "remapped": [2, 1, 1, 0], "retired_sbe": 2,
     "retired_dbe": 1, "nvlinks_down": 2, "nvlink_errors": 5, "thermal_violation_ns": 2500000000},
    {"serial": "1650000000001"},
    {"mig": 1},
    {"nvlinks": 0, "numa": 1}
  ],
  "topology": [[0, 10, 40, 50], [10, 0, 40, 50], [40, 40, 0, 50], [50, 50, 50, 0]]
})";

TEST_F(NvmlBackendTest, DiscoversIdentityTopologyAndVersions) {
  Double d(NVML_DOUBLE);
  d.Configure(kFourGpus);
  const int init_v2 = d.calls("nvmlInit_v2"), init_v1 = d.calls("nvmlInit");
  const int pci_v3 = d.calls("nvmlDeviceGetPciInfo_v3"), pci_v1 = d.calls("nvmlDeviceGetPciInfo");
  auto b = Make(NVML_DOUBLE);
  ASSERT_TRUE(b);
  auto info = b->Discover();
  ASSERT_TRUE(info.ok()) << info.status().message();
  EXPECT_EQ(info->driver_version, "570.86.15");
  EXPECT_EQ(info->cuda_version, "12.8");
  ASSERT_EQ(info->gpus.size(), 4u);
  const pb::GpuInfo& g0 = info->gpus[0];
  EXPECT_EQ(g0.uuid(), "GPU-double-0");
  EXPECT_EQ(g0.model(), "NVIDIA H100 80GB HBM3");
  EXPECT_EQ(g0.memory_mib(), 80u * 1024);
  EXPECT_EQ(g0.pci_bus_id(), "00000000:18:00.0");
  EXPECT_EQ(g0.minor_number(), 0);
  EXPECT_EQ(g0.numa_node(), 0);
  EXPECT_EQ(g0.mig_mode(), "disabled");
  EXPECT_EQ(info->gpus[1].serial(), "1650000000001");
  EXPECT_EQ(info->gpus[2].mig_mode(), "enabled");
  EXPECT_TRUE(info->gpus[2].mig());
  EXPECT_EQ(info->gpus[3].numa_node(), 1);
  EXPECT_EQ(info->gpus[3].pci_bus_id(), "00000000:48:00.0");
  // GPU 3 has no NVLink: nobody's peer.
  EXPECT_EQ(std::vector<uint32_t>(g0.nvlink_peers().begin(), g0.nvlink_peers().end()),
            (std::vector<uint32_t>{1, 2}));
  EXPECT_EQ(info->gpus[3].nvlink_peers_size(), 0);
  EXPECT_EQ(std::vector<uint32_t>(g0.topology_level().begin(), g0.topology_level().end()),
            (std::vector<uint32_t>{0, 10, 40, 50}));
  // The current symbols, not their v1 fallbacks.
  EXPECT_EQ(d.calls("nvmlInit_v2"), init_v2 + 1);
  EXPECT_EQ(d.calls("nvmlInit"), init_v1);
  EXPECT_EQ(d.calls("nvmlDeviceGetPciInfo_v3"), pci_v3 + 4);
  EXPECT_EQ(d.calls("nvmlDeviceGetPciInfo"), pci_v1);
  const int shutdowns = d.calls("nvmlShutdown");
  b.reset();
  EXPECT_EQ(d.calls("nvmlShutdown"), shutdowns + 1);
}

// The double answers as an H100-80GB does; the backend's reading must match the geometry table
// the scheduler places by, profile by profile.
TEST_F(NvmlBackendTest, ReadsMigProfilesAndPlacements) {
  Double d(NVML_DOUBLE);
  d.Configure(kFourGpus);
  auto b = Make(NVML_DOUBLE);
  ASSERT_TRUE(b);
  auto info = b->Discover();
  ASSERT_TRUE(info.ok()) << info.status().message();
  EXPECT_EQ(info->gpus[0].mig_profiles_size(), 0);  // not in MIG mode: not asked
  const pb::GpuInfo& mig = info->gpus[2];
  pb::GpuInfo table;
  table.set_memory_mib(mig.memory_mib());
  AddTableMigProfiles(&table);
  ASSERT_EQ(mig.mig_profiles_size(), 6);
  for (int i = 0; i < 6; ++i) {
    const pb::MigProfile& got = mig.mig_profiles(i);
    const pb::MigProfile& want = table.mig_profiles(i);
    SCOPED_TRACE(want.name());
    EXPECT_EQ(got.name(), want.name());
    EXPECT_EQ(got.nvml_profile(), want.nvml_profile());
    EXPECT_EQ(got.compute_slices(), want.compute_slices());
    EXPECT_EQ(got.memory_slices(), want.memory_slices());
    EXPECT_EQ(got.instances(), want.instances());
    EXPECT_EQ(std::vector<uint32_t>(got.starts().begin(), got.starts().end()),
              std::vector<uint32_t>(want.starts().begin(), want.starts().end()));
  }
  EXPECT_EQ(mig.mig_profiles(3).name(), "3g.40gb");
  EXPECT_EQ(mig.mig_profiles(3).id(), 9u);
  EXPECT_EQ(mig.mig_profiles(3).memory_mib(), 40448u);
  EXPECT_GT(d.calls("nvmlDeviceGetGpuInstancePossiblePlacements_v2"), 0);
  // A Launch is checked against what the driver said.
  pb::Launch l;
  pb::MigInstance* mi = l.add_mig_instances();
  mi->set_gpu_index(2);
  mi->set_profile("3g.40gb");
  mi->set_start(4);
  mi->set_memory_slices(4);
  EXPECT_TRUE(CheckMigInstances(info->gpus, l).ok());
  mi->set_start(2);
  EXPECT_EQ(CheckMigInstances(info->gpus, l).message(),
            "GPU 2 offers 3g.40gb starts at 0, 4 (4 memory slices), not slice 2");
  mi->set_gpu_index(0);
  EXPECT_FALSE(CheckMigInstances(info->gpus, l).ok());  // not in MIG mode
}

TEST_F(NvmlBackendTest, SamplesEveryField) {
  Double d(NVML_DOUBLE);
  d.Configure(kFourGpus);
  auto b = Make(NVML_DOUBLE);
  ASSERT_TRUE(b && b->Discover().ok());
  const int event_reasons = d.calls("nvmlDeviceGetCurrentClocksEventReasons");
  const int throttle_reasons = d.calls("nvmlDeviceGetCurrentClocksThrottleReasons");
  auto s = b->Sample(0);
  ASSERT_TRUE(s.ok());
  ASSERT_EQ(s->size(), 4u);
  const pb::GpuTelemetry& t = (*s)[0];
  EXPECT_FALSE(t.lost());
  EXPECT_EQ(t.util_pct(), 87u);
  EXPECT_EQ(t.mem_util_pct(), 40u);
  EXPECT_EQ(t.memory_used_mib(), 40u * 1024);
  EXPECT_EQ(t.memory_total_mib(), 80u * 1024);
  EXPECT_EQ(t.temperature_c(), 71u);
  EXPECT_EQ(t.power_mw(), 650000u);
  EXPECT_EQ(t.energy_mj(), 123456u);
  EXPECT_EQ(t.sm_clock_mhz(), 1980u);
  EXPECT_EQ(t.mem_clock_mhz(), 2619u);
  EXPECT_EQ(t.clock_event_reasons(), 68u);
  EXPECT_EQ(t.pcie_gen(), 4u);
  EXPECT_EQ(t.pcie_width(), 8u);
  EXPECT_EQ(t.pcie_gen_max(), 5u);
  EXPECT_EQ(t.pcie_width_max(), 16u);
  EXPECT_EQ(t.pcie_replay_count(), 12u);
  EXPECT_EQ(t.ecc_sbe_volatile(), 3u);
  EXPECT_EQ(t.ecc_dbe_volatile(), 1u);
  EXPECT_EQ(t.remapped_rows_correctable(), 2u);
  EXPECT_EQ(t.remapped_rows_uncorrectable(), 1u);
  EXPECT_TRUE(t.remap_pending());
  EXPECT_FALSE(t.remap_failure());
  EXPECT_EQ(t.retired_pages(), 3u);
  EXPECT_EQ(t.nvlink_down(), 2u);
  EXPECT_EQ(t.nvlink_errors(), 18u * 4 * 5);  // every counter of every link
  EXPECT_EQ(t.thermal_violation_ms(), 2500u);
  EXPECT_EQ(t.hw_slowdown_events(), 1u);
  EXPECT_EQ((*s)[3].nvlink_down(), 0u);
  EXPECT_EQ((*s)[3].nvlink_errors(), 0u);
  EXPECT_EQ(d.calls("nvmlDeviceGetCurrentClocksEventReasons"), event_reasons + 4);
  EXPECT_EQ(d.calls("nvmlDeviceGetCurrentClocksThrottleReasons"), throttle_reasons);
}

TEST_F(NvmlBackendTest, CountsHardwareSlowdownsAsTheyBegin) {
  Double d(NVML_DOUBLE);
  d.Configure(R"({"gpus": [{"clock_reasons": 64}]})");
  auto b = Make(NVML_DOUBLE);
  ASSERT_TRUE(b && b->Discover().ok());
  EXPECT_EQ((*b->Sample(0))[0].hw_slowdown_events(), 1u);
  EXPECT_EQ((*b->Sample(0))[0].hw_slowdown_events(), 1u);  // the same slowdown
  d.Configure(R"({"gpus": [{"clock_reasons": 1}]})");
  EXPECT_EQ((*b->Sample(0))[0].hw_slowdown_events(), 1u);
  d.Configure(R"({"gpus": [{"clock_reasons": 128}]})");
  EXPECT_EQ((*b->Sample(0))[0].hw_slowdown_events(), 2u);
}

TEST_F(NvmlBackendTest, LostGpuIsReportedNotFatal) {
  Double d(NVML_DOUBLE);
  d.Configure(R"({"gpus": 3})");
  auto b = Make(NVML_DOUBLE);
  ASSERT_TRUE(b && b->Discover().ok());
  d.Configure(R"({"gpus": [{}, {"fail": {"*": 15}}, {"fail": {"nvmlDeviceGetPowerUsage": 3}}]})");
  const int temperature_calls = d.calls("nvmlDeviceGetTemperature");
  auto s = b->Sample(0);
  ASSERT_TRUE(s.ok());
  EXPECT_FALSE((*s)[0].lost());
  EXPECT_TRUE((*s)[1].lost());
  EXPECT_EQ((*s)[1].index(), 1u);
  EXPECT_EQ((*s)[1].temperature_c(), 0u);
  EXPECT_FALSE((*s)[2].lost());  // not supported is not lost: that field is left unset
  EXPECT_EQ((*s)[2].power_mw(), 0u);
  EXPECT_EQ((*s)[2].temperature_c(), 33u);
  // After GPU_IS_LOST the backend stops asking that GPU.
  EXPECT_EQ(d.calls("nvmlDeviceGetTemperature"), temperature_calls + 2);
}

TEST_F(NvmlBackendTest, GpuLostAtStartStillAppears) {
  Double d(NVML_DOUBLE);
  d.Configure(R"({"gpus": [{}, {"fail": {"*": 15}}]})");
  auto b = Make(NVML_DOUBLE);
  ASSERT_TRUE(b);
  auto info = b->Discover();
  ASSERT_TRUE(info.ok());
  ASSERT_EQ(info->gpus.size(), 2u);
  EXPECT_EQ(info->gpus[1].model(), "unknown (lost)");
  EXPECT_EQ(info->gpus[0].topology_level_size(), 0);  // no level to a GPU NVML cannot name
  EXPECT_TRUE((*b->Sample(0))[1].lost());
}

TEST_F(NvmlBackendTest, DrainsXidAndEccEvents) {
  Double d(NVML_DOUBLE);
  d.Configure(R"({"gpus": 2, "events": [{"gpu": 1, "type": 8, "data": 79},
                                       {"gpu": 0, "type": 2, "data": 0},
                                       {"gpu": 0, "type": 256, "data": 0}]})");
  const int waits = d.calls("nvmlEventSetWait_v2");
  auto b = Make(NVML_DOUBLE);
  ASSERT_TRUE(b && b->Discover().ok());
  auto e = b->PollEvents(5000);
  ASSERT_EQ(e.size(), 2u);  // MIG config changes were not asked for
  EXPECT_EQ(e[0].index(), 1u);
  EXPECT_EQ(e[0].kind(), "xid");
  EXPECT_EQ(e[0].code(), 79u);
  EXPECT_EQ(e[0].time_ms(), 5000);
  EXPECT_EQ(e[1].kind(), "ecc_dbe");
  EXPECT_TRUE(b->PollEvents(6000).empty());
  d.push_event(0, nvml::kEventXidCritical, 48);
  e = b->PollEvents(7000);
  ASSERT_EQ(e.size(), 1u);
  EXPECT_EQ(e[0].code(), 48u);
  EXPECT_GT(d.calls("nvmlEventSetWait_v2"), waits);
}

TEST_F(NvmlBackendTest, ReadsXidsFromTheKernelLogOncePerXid) {
  Double d(NVML_DOUBLE);
  d.Configure(R"({"gpus": 3})");
  NvmlOptions o;
  o.kernel_log = (dir_ / "kmsg").string();
  std::ofstream(o.kernel_log) << "[ 9.0] NVRM: Xid (PCI:0000:38:00): 31, pid=5, MMU Fault\n"
                              << "[ 9.1] NVRM: Xid (PCI:0000:99:00): 13, not one of ours\n";
  auto b = Make(NVML_DOUBLE, o);
  ASSERT_TRUE(b && b->Discover().ok());
  auto e = b->PollEvents(1000);
  ASSERT_EQ(e.size(), 1u);
  EXPECT_EQ(e[0].index(), 2u);
  EXPECT_EQ(e[0].code(), 31u);
  EXPECT_EQ(e[0].message(), "NVRM: Xid (PCI:0000:38:00): 31, pid=5, MMU Fault");
  // The same Xid from both sources is one Xid; a second one is another.
  d.push_event(1, nvml::kEventXidCritical, 79);
  std::ofstream(o.kernel_log, std::ios::app)
      << "NVRM: Xid (PCI:0000:28:00): 79, GPU has fallen off the bus.\n";
  e = b->PollEvents(2000);
  ASSERT_EQ(e.size(), 1u);
  EXPECT_EQ(e[0].code(), 79u);
  std::ofstream(o.kernel_log, std::ios::app)
      << "NVRM: Xid (PCI:0000:28:00): 79, GPU has fallen off the bus.\n";
  EXPECT_EQ(b->PollEvents(3000).size(), 1u);
}

TEST_F(NvmlBackendTest, MissingLibraryIsNotSupported) {
  auto b = MakeNvmlBackend(NvmlOptions{.library = "/nonexistent/libnvidia-ml.so.1"});
  ASSERT_FALSE(b.ok());
  EXPECT_EQ(b.status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(b.status().message().rfind("cannot load /nonexistent/libnvidia-ml.so.1 (", 0), 0u)
      << b.status().message();
}

TEST_F(NvmlBackendTest, DriverNotLoadedSaysSo) {
  Double d(NVML_DOUBLE);
  d.Configure(R"({"fail": {"nvmlInit_v2": 9}})");
  auto b = MakeNvmlBackend(NvmlOptions{.library = NVML_DOUBLE, .kernel_log = ""});
  ASSERT_FALSE(b.ok());
  EXPECT_EQ(b.status().message(), std::string("NVML in ") + NVML_DOUBLE +
                                      " did not start: Driver Not Loaded (9); check that the "
                                      "NVIDIA driver is loaded (nvidia-smi)");
}

TEST_F(NvmlBackendTest, MissingRequiredSymbolNamesIt) {
  auto b = MakeNvmlBackend(NvmlOptions{.library = NVML_DOUBLE_NOHANDLE, .kernel_log = ""});
  ASSERT_FALSE(b.ok());
  EXPECT_EQ(b.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(b.status().message(), std::string(NVML_DOUBLE_NOHANDLE) +
                                      " exports neither nvmlDeviceGetHandleByIndex_v2 nor "
                                      "nvmlDeviceGetHandleByIndex, which the agent needs: this "
                                      "is not a usable NVML; reinstall the NVIDIA driver");
}

TEST_F(NvmlBackendTest, OldNvmlFallsBackToV1AndLeavesTheRestUnset) {
  Double d(NVML_DOUBLE_LEGACY);
  d.Configure(R"({"gpus": [{"clock_reasons": 64, "remapped": [5, 5, 1, 1], "energy_mj": 9},
                           {"numa": 1}],
                  "events": [{"gpu": 0, "type": 8, "data": 43}]})");
  NvmlOptions o;
  o.pci_root = (dir_ / "pci").string();  // the NUMA node comes from sysfs here
  fs::create_directories(dir_ / "pci/0000:28:00.0");
  std::ofstream(dir_ / "pci/0000:28:00.0/numa_node") << "1\n";
  const int init = d.calls("nvmlInit"),
            throttle = d.calls("nvmlDeviceGetCurrentClocksThrottleReasons");
  const int waits = d.calls("nvmlEventSetWait"), retired = d.calls("nvmlDeviceGetRetiredPages");
  auto b = Make(NVML_DOUBLE_LEGACY, o);
  ASSERT_TRUE(b);
  auto info = b->Discover();
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(d.calls("nvmlInit"), init + 1);
  EXPECT_EQ(info->cuda_version, "");  // nvmlSystemGetCudaDriverVersion is absent
  EXPECT_EQ(info->driver_version, "570.86.15");
  EXPECT_EQ(info->gpus[0].pci_bus_id(), "00000000:18:00.0");  // from the v1 struct's busId
  EXPECT_EQ(info->gpus[0].numa_node(), -1);                   // no NVML answer, no sysfs entry
  EXPECT_EQ(info->gpus[1].numa_node(), 1);
  auto s = b->Sample(0);
  ASSERT_TRUE(s.ok());
  const pb::GpuTelemetry& t = (*s)[0];
  EXPECT_EQ(t.clock_event_reasons(), 64u);  // via nvmlDeviceGetCurrentClocksThrottleReasons
  EXPECT_EQ(d.calls("nvmlDeviceGetCurrentClocksThrottleReasons"), throttle + 2);
  EXPECT_EQ(t.remapped_rows_uncorrectable(), 0u);
  EXPECT_FALSE(t.remap_failure());
  EXPECT_EQ(t.energy_mj(), 0u);
  EXPECT_EQ(t.thermal_violation_ms(), 0u);
  EXPECT_EQ(t.temperature_c(), 33u);
  auto e = b->PollEvents(0);
  ASSERT_EQ(e.size(), 1u);
  EXPECT_EQ(e[0].code(), 43u);
  EXPECT_GT(d.calls("nvmlEventSetWait"), waits);
  EXPECT_EQ(d.calls("nvmlDeviceGetRetiredPages"), retired + 4);  // two causes, two GPUs
}

TEST_F(NvmlBackendTest, ValidateRunsTheProgram) {
  Double d(NVML_DOUBLE);
  d.Configure(R"({"gpus": 1})");
  NvmlOptions o;
  o.scratch_dir = (dir_ / "scratch").string();
  o.validate_program = WriteScript("ok.sh", R"(echo '{"gpus":[{"index":0,"gemm_tflops":701.5}]}')");
  auto b = Make(NVML_DOUBLE, o);
  ASSERT_TRUE(b);
  auto v = b->Validate();
  ASSERT_TRUE(v.ok()) << v.status().message();
  EXPECT_EQ(*v, "{\"gpus\":[{\"index\":0,\"gemm_tflops\":701.5}]}\n");

  o.validate_program =
      WriteScript("nogpu.sh", R"(echo '{"error": "no CUDA device: no GPU"}'; exit 3)");
  v = Make(NVML_DOUBLE, o)->Validate();
  ASSERT_FALSE(v.ok());
  EXPECT_EQ(v.status().message(), "no CUDA device: no GPU");

  o.validate_program = WriteScript("crash.sh", "echo 'Segmentation fault' >&2; kill -SEGV $$");
  v = Make(NVML_DOUBLE, o)->Validate();
  ASSERT_FALSE(v.ok());
  EXPECT_EQ(v.status().message(), "hangar-validate was killed by signal 11: Segmentation fault");
}

TEST_F(NvmlBackendTest, ValidateKillsAHungProgram) {
  Double d(NVML_DOUBLE);
  d.Configure(R"({"gpus": 1})");
  NvmlOptions o;
  o.scratch_dir = (dir_ / "scratch").string();
  o.validate_program = WriteScript("hang.sh", "sleep 600 & wait");
  o.validate_timeout = 200;
  auto v = Make(NVML_DOUBLE, o)->Validate();
  ASSERT_FALSE(v.ok());
  EXPECT_EQ(v.status().message(),
            "hangar-validate did not finish within 200ms and was killed; a GPU may be hung");

  o.validate_timeout = kHour;
  auto b = Make(NVML_DOUBLE, o);
  b->CancelValidation();  // the agent is shutting down
  v = b->Validate();
  EXPECT_EQ(v.status().code(), StatusCode::kAborted);
}

// Topology discovery through NVML: GPUs 0-1 bridged to each other, 2-3 on NVSwitches, all four
// in one NVL72-class fabric clique except GPU 3, whose registration is still in progress.
TEST_F(NvmlBackendTest, DiscoversNvlinkPeersAndTheFabricClique) {
  Double d(NVML_DOUBLE);
  const std::string fabric =
      R"("fabric": {"uuid": "6f1c0e2a-0000-4000-8000-000000000001", "clique": 3, "state": 3})";
  d.Configure(R"({"gpus": [
    {"nvlinks": 4, "nvlink_remote": ["gpu:1", "gpu:1", "gpu:1", "gpu:1"], )" +
              fabric + R"(},
    {"nvlinks": 4, "nvlink_remote": ["gpu:0", "gpu:0", "gpu:0", "gpu:0"], )" +
              fabric + R"(},
    {"nvlinks": 18, "nvlinks_down": 2, )" +
              fabric + R"(},
    {"nvlinks": 18, "fabric": {"uuid": "6f1c0e2a-0000-4000-8000-000000000001", "state": 2}}]})");
  auto b = Make(NVML_DOUBLE);
  ASSERT_NE(b, nullptr);
  ASSERT_TRUE(b->Discover().ok());
  const std::vector<pb::DiscoveredGpu> g = b->DiscoverNvlinks();
  ASSERT_EQ(g.size(), 4u);
  EXPECT_EQ(std::vector<uint32_t>(g[0].nvlink_peers().begin(), g[0].nvlink_peers().end()),
            std::vector<uint32_t>{1});
  EXPECT_EQ(g[0].nvlinks_active(), 4u);
  EXPECT_EQ(g[0].nvlinks_to_switch(), 0u);
  EXPECT_EQ(std::vector<uint32_t>(g[2].nvlink_peers().begin(), g[2].nvlink_peers().end()),
            std::vector<uint32_t>{3});
  EXPECT_EQ(g[2].nvlinks_active(), 16u);  // the first two links are down
  EXPECT_EQ(g[2].nvlinks_to_switch(), 16u);
  EXPECT_EQ(g[0].fabric_state(), "completed");
  EXPECT_EQ(g[0].fabric_cluster_uuid(), "6f1c0e2a-0000-4000-8000-000000000001");
  EXPECT_EQ(g[0].fabric_clique_id(), 3u);
  EXPECT_EQ(g[3].fabric_state(), "in_progress");
  EXPECT_EQ(g[3].fabric_cluster_uuid(), "");  // not registered yet: no clique to count
  EXPECT_GE(d.calls("nvmlDeviceGetGpuFabricInfoV"), 4);

  // An old NVML has none of these calls: links by state only, and no fabric.
  Double legacy(NVML_DOUBLE_LEGACY);
  legacy.Configure(R"({"gpus": 2})");
  auto old = Make(NVML_DOUBLE_LEGACY);
  ASSERT_NE(old, nullptr);
  ASSERT_TRUE(old->Discover().ok());
  const auto l = old->DiscoverNvlinks();
  ASSERT_EQ(l.size(), 2u);
  EXPECT_EQ(l[0].nvlinks_active(), 18u);
  EXPECT_EQ(l[0].fabric_state(), "not_supported");
}

}  // namespace
}  // namespace hangar::agent
