// What the health rules read: telemetry samples, GPU events, fabric counters, validation results,
// configuration facts and operator actions. Plain values mirroring the agent's messages
// (proto/agent.proto), so that `health` needs no protobuf; the controller copies fields across.
//
// Counters are raw readings as the hardware reports them (cumulative, possibly reset); the rules
// compute deltas. Times must not go backwards per GPU or port (older readings are ignored): if
// agents' clocks are not trusted, the controller stamps heartbeats with its own clock. A field the
// agent could not read stays 0 / false / empty, and the rules treat 0 as "unknown" where 0 would
// otherwise be alarming (PCIe max generation and width).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "common/time.h"

namespace hangar::health {

// Bits of nvmlDeviceGetCurrentClocksEventReasons that mean the hardware is protecting itself.
inline constexpr uint64_t kClockEventHwSlowdown = 0x8;
inline constexpr uint64_t kClockEventHwThermalSlowdown = 0x40;
inline constexpr uint64_t kClockEventHwPowerBrakeSlowdown = 0x80;
inline constexpr uint64_t kClockEventHardwareMask =
    kClockEventHwSlowdown | kClockEventHwThermalSlowdown | kClockEventHwPowerBrakeSlowdown;

// One GPU at one moment (a heartbeat's GpuTelemetry).
struct GpuSample {
  uint16_t index = 0;  // ordinal within its node
  Time at = 0;         // when the agent read it
  uint32_t util_pct = 0;
  uint64_t memory_used_mib = 0;
  uint64_t memory_total_mib = 0;
  uint32_t temperature_c = 0;
  uint32_t power_mw = 0;
  uint32_t sm_clock_mhz = 0;
  uint64_t clock_event_reasons = 0;
  uint32_t pcie_gen = 0;  // current link; 0 = unknown
  uint32_t pcie_width = 0;
  uint32_t pcie_gen_max = 0;  // what the link can do; 0 = unknown
  uint32_t pcie_width_max = 0;
  uint64_t pcie_replay_count = 0;  // cumulative
  uint64_t ecc_sbe_volatile = 0;   // since the last driver load / GPU reset
  uint64_t ecc_dbe_volatile = 0;
  uint32_t remapped_rows_correctable = 0;
  uint32_t remapped_rows_uncorrectable = 0;
  bool remap_pending = false;
  bool remap_failure = false;
  uint32_t retired_pages = 0;
  uint32_t nvlink_down = 0;           // links that are down
  uint64_t nvlink_errors = 0;         // cumulative, summed over links and counter kinds
  bool lost = false;                  // fell off the bus (NVML GPU_IS_LOST)
  uint64_t thermal_violation_ms = 0;  // cumulative time clocked down for heat
  uint64_t hw_slowdown_events = 0;    // cumulative hardware slowdown events
};

// An asynchronous GPU event (NVML event set or the kernel log).
struct GpuEvent {
  enum class Kind : uint8_t { kXid, kEccSbe, kEccDbe };
  uint16_t index = 0;  // GPU ordinal within its node
  Kind kind = Kind::kXid;
  uint64_t code = 0;  // the Xid; unused for ECC events
  Time at = 0;
  std::string message;  // the driver's text, if any (kept out of rules, shown to people)
};

// One InfiniBand / RoCE port: /sys/class/infiniband/<device>/ports/<port>/.
struct IbPortSample {
  std::string device;  // "mlx5_0"
  uint32_t port = 1;
  Time at = 0;
  std::string state;                         // "4: ACTIVE"
  std::string phys_state;                    // "5: LinkUp"
  std::map<std::string, uint64_t> counters;  // counters/ and hw_counters/ by file name, raw
};

// One GPU's benchmark results. 0 means "not measured".
struct GpuBenchmark {
  uint16_t index = 0;
  double gemm_tflops = 0;
  double mem_bw_gbs = 0;  // device memory bandwidth
  double h2d_gbs = 0;     // host to device copy
  double d2h_gbs = 0;     // device to host copy
};

// One validation run on one node (hangar-validate's output). It may cover only some GPUs.
struct ValidationReport {
  Time at = 0;            // when the run finished
  std::string gpu_model;  // empty: the Topology's model for the node
  bool ran = true;        // false: validation could not run; `error` says why
  std::string error;
  std::vector<GpuBenchmark> gpus;
  double nccl_busbw_gbs = 0;   // single-node all-reduce bus bandwidth; 0 = not measured
  double nccl_latency_us = 0;  // small-message all-reduce latency; 0 = not measured
};

// Software a node runs. An empty field in an expected baseline means "anything goes".
struct ConfigFacts {
  std::string driver;
  std::string cuda;
  std::string kernel;
  std::string ofed;
};

// A workload's own evidence that a node is slow: a rank of a gang there takes persistently longer
// a step than the gang's median (the controller's straggler detection from progress reports). The
// node is suspect while it keeps coming, and for Thresholds::straggler_quiet after.
struct StragglerSignal {
  Time at = 0;
  std::string evidence;  // the sentence with the numbers, quoted in the condition
};

enum class Remedy : uint8_t {
  kGpuReset,    // one GPU was reset
  kNodeReboot,  // the node was rebooted (resets every GPU)
  kRepair,      // hardware replaced or repaired: also returns a failed subject to the pool
};

// Something a person or the controller did. `gpu` -1 means the node itself.
struct OperatorAction {
  enum class Kind : uint8_t {
    kDrain,             // cordon by hand (never held back by the safety valve)
    kUndrain,           // lift a cordon by hand; faults still have to clear
    kWorkDrained,       // the controller moved every task off (draining -> quarantined)
    kRemediated,        // `remedy` was done
    kNodeLost,          // heartbeats stopped
    kNodeReturned,      // heartbeats resumed
    kResetSafetyValve,  // an operator looked; allow new drains again (node ignored)
  };
  Kind kind = Kind::kDrain;
  uint32_t node = 0;  // node index in the Topology
  int gpu = -1;
  Time at = 0;
  Remedy remedy = Remedy::kGpuReset;  // kRemediated only
  std::string note;                   // who/why, quoted in reasons
};

}  // namespace hangar::health
