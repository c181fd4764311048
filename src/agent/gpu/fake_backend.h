// The fake GPU backend: GPUs that exist only in memory, healthy until a fault script
// (fault_script.h) breaks them. A GPU a task holds reports 100% utilisation unless the task writes
// another number (0-100) into its HANGAR_FAKE_GPU_UTIL_FILE; an idle GPU reports 0%.
//
// What each fault kind does, from `at` on (timed kinds until `at + duration`, when one is given):
//   xid              one GpuEvent {kind "xid", code}
//   thermal_throttle clock_event_reasons gains the HW thermal slowdown bit (0x40), the SM clock
//                    drops and the temperature rises while active; thermal_violation_ms grows by
//                    the time spent throttled and hw_slowdown_events by one per 10 s of it
//   pcie_downgrade   pcie_gen / pcie_width drop to the given values (the maxima stay)
//   ecc_sbe, ecc_dbe the volatile counter rises by `count`; ecc_dbe also sends an "ecc_dbe" event
//   nvlink_down      nvlink_down = 1
//   fall_off_bus     the GPU reports lost = true (and nothing else) and sends Xid 79
//   slow             Validate() reports the GPU's figures times `factor`
// NVLink peers and the NVLink fabric follow `nvlink` and `fabric_*` (DiscoverNvlinks).
// MIG-mode GPUs keep a layout of GPU instances that ReshapeMig changes (see FakeGpuOptions).
// Telemetry is a function of the faults and the time, so a ManualClock makes it exact.
#pragma once

#include <memory>
#include <string>

#include "agent/gpu/gpu_backend.h"
#include "common/time.h"

namespace hangar::agent {

struct FakeGpuOptions {
  int count = 8;
  std::string model = "H100-SXM-80GB";
  int64_t memory_mib = 80 * 1024;
  int numa_nodes = 2;
  bool mig = false;  // MIG mode: the GPUs offer the geometry table's profiles for their memory
  // MIG GPU instances live in memory (geometry as the driver enforces it, MIG UUIDs derived from
  // node, GPU, start and profile) and, with a state file, survive the agent's restarts as real
  // ones do. A MIG GPU starts with no instances (the agent creates a static layout, if given).
  std::string mig_state_file;
  std::string faults_file;  // fault script, `at` counted from the backend's creation
  // NVLink between the node's GPUs: "switch" (each reaches every other through NVSwitch, as on
  // HGX boards), "pairs" (bridged pairs 0-1, 2-3, ...) or "none" (PCIe cards).
  std::string nvlink = "switch";
  // A multi-node NVLink fabric (NVL72-class): the cluster UUID and clique every GPU reports, as
  // NVML's GPU fabric info does once the fabric manager has registered it; "" reports none.
  std::string fabric_cluster_uuid;
  uint32_t fabric_clique_id = 0;
};

// Healthy validation figures of one simulated GPU (H100-class, bf16 dense GEMM).
inline constexpr double kFakeGemmTflops = 700;
inline constexpr double kFakeMemBwGbs = 3000;
inline constexpr double kFakeHostLinkGbs = 50;
inline constexpr double kFakeNcclBusBwGbs = 400;

// Fails when the options are out of range or the fault script does not parse (file:line).
// `clock` must outlive the backend; Validate() reads it.
StatusOr<std::unique_ptr<GpuBackend>> MakeFakeBackend(const FakeGpuOptions& options,
                                                      const std::string& node, Clock* clock);

}  // namespace hangar::agent
