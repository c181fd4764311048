#include "health/gpu_rules.h"

#include <algorithm>
#include <cmath>

#include "health/text.h"

namespace hangar::health {
namespace {

using A = RecommendedAction;

// Line rate per lane in MT/s (8b/10b overhead for Gen1-2 is the hardware's business: DCGM's
// formula uses the raw rate).
uint64_t LaneRateMtps(uint32_t gen) {
  switch (gen) {
    case 1:
      return 2500;
    case 2:
      return 5000;
    case 3:
      return 8000;
    case 4:
      return 16000;
    case 5:
      return 32000;
    case 6:
      return 64000;
    default:
      return 0;
  }
}

std::string Link(uint32_t gen, uint32_t width) {
  return "Gen" + std::to_string(gen) + " x" + std::to_string(width);
}

}  // namespace

uint64_t PcieReplayLimitPerMinute(uint32_t gen, uint32_t width) {
  // lanes x 1e-12 x (MT/s x 1e6) x 60 = lanes x MT/s x 60 / 1e6, rounded up.
  uint64_t bits = uint64_t{width} * LaneRateMtps(gen) * 60;
  return (bits + 999'999) / 1'000'000;
}

GpuRules::GpuRules(uint16_t index, const Thresholds& th)
    : index_(index),
      replays_(kMinute),
      thermal_ms_(th.thermal_window),
      slowdowns_(th.hw_slowdown_window),
      nvlink_errors_(kMinute) {}

Finding GpuRules::Make(std::string key, Effect effect, RecommendedAction action,
                       std::string reason) const {
  Finding f;
  f.condition.type = key;
  f.key = std::move(key);
  f.condition.effect = effect;
  f.condition.scope = Scope::kGpu;
  f.condition.gpu = index_;
  f.condition.action = action;
  f.condition.reason = std::move(reason);
  return f;
}

void GpuRules::OnSample(const GpuSample& s, const Thresholds& th, RuleOutput* out) {
  if (s.at < last_at_) return;
  last_at_ = s.at;
  std::string lost_key = "gpu" + std::to_string(index_) + "_lost";
  if (s.lost) {
    // Like Xid 79: the node's PCIe fabric is in doubt and only a reboot brings the GPU back.
    Finding f = Make(lost_key, Effect::kDrain, A::kDrainNodeAndReboot,
                     Gpu() + " fell off the bus (the driver reports it lost)");
    f.condition.type = "gpu_lost";
    f.condition.scope = Scope::kNode;
    out->Raise(std::move(f));
    return;  // a lost GPU's other readings mean nothing
  }
  out->Clear(Scope::kNode, lost_key);
  CheckMemory(s, th, out);
  CheckPcie(s, th, out);
  CheckThermal(s, th, out);
  CheckNvlink(s, th, out);
}

void GpuRules::CheckMemory(const GpuSample& s, const Thresholds& th, RuleOutput* out) const {
  if (s.ecc_dbe_volatile > 0) {
    Finding f = Make("ecc_dbe", Effect::kDrain, A::kDrainGpuAndReset,
                     Gpu() + ": " + std::to_string(s.ecc_dbe_volatile) +
                         " volatile double-bit ECC errors since its last reset");
    f.clearing = Clearing::kOnRemediation;  // volatile counters zero on reset: the sign it's done
    out->Raise(std::move(f));
  }
  if (s.retired_pages >= th.retired_pages_fatal) {
    out->Raise(Make("retired_pages", Effect::kDrain, A::kDrainGpuForRepair,
                    Gpu() + ": " + std::to_string(s.retired_pages) + " retired pages (limit " +
                        std::to_string(th.retired_pages_fatal) + "): replace it"));
  } else {
    out->Clear(Scope::kGpu, "retired_pages");
  }
  if (s.remapped_rows_uncorrectable >= th.remapped_rows_uncorrectable_warn) {
    out->Raise(Make("remapped_rows", Effect::kSuspect, A::kInspectHardware,
                    Gpu() + ": " + std::to_string(s.remapped_rows_uncorrectable) +
                        " rows remapped for uncorrectable errors (warn at " +
                        std::to_string(th.remapped_rows_uncorrectable_warn) + ")"));
  } else {
    out->Clear(Scope::kGpu, "remapped_rows");
  }
  if (s.remap_failure) {
    out->Raise(Make("row_remap_failure", Effect::kDrain, A::kDrainGpuForRepair,
                    Gpu() + ": a row remap failed: no spare rows left, replace it"));
  } else {
    out->Clear(Scope::kGpu, "row_remap_failure");
  }
  if (s.remap_pending) {
    out->Raise(Make("row_remap_pending", Effect::kDrain, A::kDrainGpuAndReset,
                    Gpu() + ": a row remap is pending; it takes effect at the next reset"));
  } else {
    out->Clear(Scope::kGpu, "row_remap_pending");
  }
}

void GpuRules::CheckPcie(const GpuSample& s, const Thresholds& th, RuleOutput* out) {
  bool width_low = s.pcie_width_max > 0 && s.pcie_width > 0 && s.pcie_width < s.pcie_width_max;
  bool gen_low = s.pcie_gen_max > 0 && s.pcie_gen > 0 && s.pcie_gen < s.pcie_gen_max;
  bool busy = s.util_pct >= th.pcie_busy_util_pct;
  if (width_low || (gen_low && busy)) {
    out->Raise(Make("pcie_link_degraded", Effect::kSuspect, A::kInspectHardware,
                    "PCIe " + Link(s.pcie_gen_max, s.pcie_width_max) + " → " +
                        Link(s.pcie_gen, s.pcie_width) + " on " + Gpu() +
                        ": the link trained below its maximum"));
  } else if (!gen_low) {
    out->Clear(Scope::kGpu, "pcie_link_degraded");
  }  // an idle GPU below its generation may just be saving power: no verdict either way

  replays_.Add(s.at, s.pcie_replay_count);
  uint64_t limit = PcieReplayLimitPerMinute(s.pcie_gen, s.pcie_width);
  double replays = replays_.InWindow(kMinute);
  if (limit > 0 && replays > static_cast<double>(limit)) {
    Finding f =
        Make("pcie_replays", Effect::kSuspect, A::kInspectHardware,
             Gpu() + ": " + Count(replays) + " PCIe replays in the last minute (limit " +
                 std::to_string(limit) + "/min for " + Link(s.pcie_gen, s.pcie_width) + ")");
    f.clearing = Clearing::kAfterQuiet;
    f.quiet = th.rate_quiet;
    out->Raise(std::move(f));
  }
}

void GpuRules::CheckThermal(const GpuSample& s, const Thresholds& th, RuleOutput* out) {
  thermal_ms_.Add(s.at, s.thermal_violation_ms);
  double ms = thermal_ms_.InWindow(th.thermal_window);
  if (ms > 0) {
    Finding f = Make("thermal_violation", Effect::kSuspect, A::kInspectHardware,
                     Gpu() + " was clocked down for heat for " + Count(ms) + " ms in the last " +
                         FormatDuration(th.thermal_window) + " (at " +
                         std::to_string(s.temperature_c) + " C)");
    f.clearing = Clearing::kAfterQuiet;
    f.quiet = th.rate_quiet;
    out->Raise(std::move(f));
  }
  slowdowns_.Add(s.at, s.hw_slowdown_events);
  double events = slowdowns_.InWindow(th.hw_slowdown_window);
  double limit = th.hw_slowdown_per_minute * static_cast<double>(th.hw_slowdown_window) / kMinute;
  if (events > 0 && events + 1e-9 >= limit) {
    Finding f = Make("hw_slowdown", Effect::kDegrade, A::kInspectHardware,
                     Gpu() + ": " + Count(events) + " hardware slowdown events in the last " +
                         FormatDuration(th.hw_slowdown_window) + " (limit " +
                         Fixed(th.hw_slowdown_per_minute, 1) + "/min)");
    f.clearing = Clearing::kAfterQuiet;
    f.quiet = th.rate_quiet;
    out->Raise(std::move(f));
  }
  if (s.clock_event_reasons & kClockEventHardwareMask) {
    Finding f = Make("clocks_hw_limited", Effect::kNone, A::kWatch,
                     Gpu() + ": the hardware is holding its clocks down (reasons " +
                         Hex(s.clock_event_reasons) + ", SM at " + std::to_string(s.sm_clock_mhz) +
                         " MHz)");
    out->Raise(std::move(f));
  } else {
    out->Clear(Scope::kGpu, "clocks_hw_limited");
  }
}

void GpuRules::CheckNvlink(const GpuSample& s, const Thresholds& th, RuleOutput* out) {
  if (s.nvlink_down > 0) {
    out->Raise(Make("nvlink_down", Effect::kDrain, A::kDrainGpuAndReset,
                    Gpu() + ": " + std::to_string(s.nvlink_down) + " NVLink links down"));
  } else {
    out->Clear(Scope::kGpu, "nvlink_down");
  }
  nvlink_errors_.Add(s.at, s.nvlink_errors);
  double errors = nvlink_errors_.InWindow(kMinute);
  if (errors > 0) {
    Finding f = Make("nvlink_errors", Effect::kNone, A::kWatch,
                     Gpu() + ": " + Count(errors) + " NVLink errors in the last minute");
    f.clearing = Clearing::kAfterQuiet;
    f.quiet = th.rate_quiet;
    out->Raise(std::move(f));
  }
}

void GpuRules::OnEccEvent(const GpuEvent& e, const Thresholds& th, RuleOutput* out) const {
  if (e.kind == GpuEvent::Kind::kEccDbe) {
    Finding f = Make("ecc_dbe", Effect::kDrain, A::kDrainGpuAndReset,
                     Gpu() + ": double-bit ECC error reported by the driver");
    f.clearing = Clearing::kOnRemediation;
    out->Raise(std::move(f));
  } else if (e.kind == GpuEvent::Kind::kEccSbe) {
    Finding f =
        Make("ecc_sbe", Effect::kNone, A::kWatch, Gpu() + ": single-bit ECC error corrected");
    f.clearing = Clearing::kAfterQuiet;
    f.quiet = th.info_quiet;
    out->Raise(std::move(f));
  }
}

}  // namespace hangar::health
