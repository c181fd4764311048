// Per-GPU telemetry rules: one GPU's samples and ECC events in, findings out. Memory, PCIe,
// thermal, NVLink and "fell off the bus"; Xids go through XidHistory.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "health/counter_track.h"
#include "health/fault_set.h"
#include "health/inputs.h"
#include "health/thresholds.h"

namespace hangar::health {

// What rules found in one observation: faults to open or refresh, and level faults they looked
// for and no longer see. Findings carry their scope: a GPU's rules may speak for its node.
struct RuleOutput {
  std::vector<Finding> raised;
  std::vector<std::pair<Scope, std::string>> cleared;

  void Raise(Finding f) { raised.push_back(std::move(f)); }
  void Clear(Scope scope, std::string key) { cleared.emplace_back(scope, std::move(key)); }
};

// DCGM's replay ceiling: ceil(lanes x 1e-12 x line rate x 60 s) per minute. 0 when the link is
// unknown. Gen4 x16: 16; Gen5 x16: 31.
uint64_t PcieReplayLimitPerMinute(uint32_t gen, uint32_t width);

class GpuRules {
 public:
  GpuRules(uint16_t index, const Thresholds& th);

  // Judges one sample. Samples older than the newest one seen are ignored.
  void OnSample(const GpuSample& s, const Thresholds& th, RuleOutput* out);
  // An ECC event (kEccSbe or kEccDbe) from the driver.
  void OnEccEvent(const GpuEvent& e, const Thresholds& th, RuleOutput* out) const;

 private:
  void CheckMemory(const GpuSample& s, const Thresholds& th, RuleOutput* out) const;
  void CheckPcie(const GpuSample& s, const Thresholds& th, RuleOutput* out);
  void CheckThermal(const GpuSample& s, const Thresholds& th, RuleOutput* out);
  void CheckNvlink(const GpuSample& s, const Thresholds& th, RuleOutput* out);
  Finding Make(std::string key, Effect effect, RecommendedAction action, std::string reason) const;
  std::string Gpu() const { return "GPU " + std::to_string(index_); }

  uint16_t index_;
  Time last_at_ = -1;
  CounterTrack replays_;
  CounterTrack thermal_ms_;
  CounterTrack slowdowns_;
  CounterTrack nvlink_errors_;
};

}  // namespace hangar::health
