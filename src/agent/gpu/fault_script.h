// Fault scripts for the fake GPU backend: hardware that breaks on cue, for tests and demos.
//
//   faults:                       # or the list alone
//     - {at: 30s, gpu: 3, kind: xid, code: 79}
//     - {at: 1m, node: true, kind: thermal_throttle, duration: 60s}
//     - {at: 2m, gpu: 0, kind: pcie_downgrade, gen: 3, width: 4}
//     - {at: 2m, gpu: 1, kind: ecc_dbe, count: 2}
//     - {at: 5m, gpu: 2, kind: slow, factor: 0.7}
//
// `at` counts from the agent's start (or, for <state_dir>/inject-faults.yaml, from when the
// agent picks the file up). Kinds and what they do are in fake_backend.h.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "common/time.h"

namespace hangar::agent {

enum class FaultKind {
  kXid,
  kThermalThrottle,
  kPcieDowngrade,
  kEccSbe,
  kEccDbe,
  kNvlinkDown,
  kFallOffBus,
  kSlow,
};

std::string_view FaultKindName(FaultKind kind);

struct Fault {
  Duration at = 0;
  int gpu = -1;  // -1: every GPU of the node (`node: true`)
  FaultKind kind = FaultKind::kXid;
  uint64_t code = 0;      // xid
  uint64_t count = 1;     // ecc_sbe, ecc_dbe
  uint32_t gen = 0;       // pcie_downgrade
  uint32_t width = 0;     // pcie_downgrade
  double factor = 1.0;    // slow
  Duration duration = 0;  // thermal_throttle, pcie_downgrade, nvlink_down, slow; 0: until restart
  std::string where;      // "faults.yaml:4", for messages
};

// Parses a fault script for a node with `gpu_count` GPUs. Errors name the document and line
// ("faults.yaml:4: ...") and say what to write instead.
StatusOr<std::vector<Fault>> ParseFaultScript(std::string_view text, const std::string& name,
                                              int gpu_count);
StatusOr<std::vector<Fault>> LoadFaultScript(const std::string& path, int gpu_count);

}  // namespace hangar::agent
