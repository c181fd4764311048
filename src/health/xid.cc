#include "health/xid.h"

#include <algorithm>
#include <array>
#include <string>

namespace hangar::health {
namespace {

using A = RecommendedAction;
using C = Clearing;
using E = Effect;
using S = Scope;

// NVIDIA's Xid catalogue, reduced to what a scheduler must do. Where an action says "reset"
// without "drain" the GPU may finish its work first.
constexpr std::array kXidRules = {
    XidRule{13, "graphics engine exception", E::kNone, S::kGpu, A::kNone, C::kAfterQuiet, true},
    XidRule{31, "GPU memory page fault", E::kNone, S::kGpu, A::kNone, C::kAfterQuiet, true},
    XidRule{43, "GPU stopped processing", E::kNone, S::kGpu, A::kNone, C::kAfterQuiet, true},
    XidRule{45, "preemptive cleanup after an earlier error", E::kNone, S::kGpu, A::kNone,
            C::kAfterQuiet},
    XidRule{48, "double-bit ECC error", E::kDrain, S::kGpu, A::kDrainGpuAndReset,
            C::kOnRemediation},
    XidRule{63, "row remap recorded; a reset is pending", E::kSuspect, S::kGpu, A::kResetGpu,
            C::kOnRemediation},
    XidRule{64, "row remap failure", E::kDrain, S::kGpu, A::kDrainGpuForRepair, C::kOnRemediation},
    XidRule{74, "NVLink error", E::kDrain, S::kGpu, A::kDrainGpuAndReset, C::kOnRemediation},
    XidRule{79, "GPU fell off the bus", E::kDrain, S::kNode, A::kDrainNodeAndReboot,
            C::kOnRemediation, false, true},
    XidRule{92, "high single-bit ECC rate", E::kNone, S::kGpu, A::kWatch, C::kAfterQuiet},
    XidRule{94, "contained memory error", E::kNone, S::kGpu, A::kRestartApp, C::kAfterQuiet},
    XidRule{95, "uncontained memory error", E::kDrain, S::kGpu, A::kDrainGpuAndReset,
            C::kOnRemediation},
    XidRule{109, "context-switch timeout", E::kSuspect, S::kGpu, A::kResetGpu, C::kOnRemediation},
    XidRule{119, "GSP RPC timeout", E::kDrain, S::kGpu, A::kDrainGpuAndReset, C::kOnRemediation},
    XidRule{120, "GSP error", E::kDrain, S::kGpu, A::kDrainGpuAndReset, C::kOnRemediation},
    XidRule{140, "unrecovered ECC error", E::kDrain, S::kGpu, A::kDrainGpuAndReset,
            C::kOnRemediation},
};

std::string XidName(uint64_t code) { return "xid_" + std::to_string(code); }

}  // namespace

XidRule XidRuleFor(uint64_t code) {
  for (const XidRule& r : kXidRules) {
    if (r.code == code) return r;
  }
  return XidRule{.code = code,
                 .meaning = "not in the catalogue",
                 .effect = E::kSuspect,
                 .scope = S::kGpu,
                 .action = A::kRunValidation,
                 .clearing = C::kAfterQuiet,
                 .known = false};
}

XidHistory::Outcome XidHistory::Apply(uint16_t gpu, uint64_t code, Time t, const Thresholds& th) {
  XidRule rule = XidRuleFor(code);
  std::deque<Time>& seen = incidents_[code];
  while (!seen.empty() && seen.front() <= t - std::max(th.app_xid_window, kDay)) seen.pop_front();

  Outcome out;
  const Duration incident = rule.app_class ? th.app_xid_incident : th.xid_incident;
  out.new_incident = seen.empty() || t - seen.back() >= incident;
  if (out.new_incident) seen.push_back(t);
  int recent = static_cast<int>(
      std::count_if(seen.begin(), seen.end(), [&](Time s) { return s > t - th.app_xid_window; }));

  std::string where = "Xid " + std::to_string(code) + " on GPU " + std::to_string(gpu) + " (" +
                      std::string(rule.meaning) + ")";
  Finding& f = out.finding;
  Condition& c = f.condition;
  c.type = XidName(code);
  c.effect = rule.effect;
  c.scope = rule.scope;
  c.gpu = gpu;
  c.action = rule.action;
  f.key = rule.scope == S::kNode ? "gpu" + std::to_string(gpu) + "_" + c.type : c.type;
  f.clearing = rule.clearing;
  f.quiet = rule.effect == E::kNone ? th.info_quiet : kDay;
  if (rule.app_class) {
    f.quiet = th.app_xid_window;
    if (recent >= 2) {
      f.key += "_repeated";
      c.type += "_repeated";
      c.effect = E::kSuspect;
      c.action = A::kRunValidation;
      c.reason = where + ": " + std::to_string(recent) + " incidents within " +
                 FormatDuration(th.app_xid_window) + "; the GPU is suspect until it validates";
    } else {
      c.reason = where + ": usually the application's fault; a second within " +
                 FormatDuration(th.app_xid_window) + " makes the GPU suspect";
    }
  } else if (!rule.known) {
    c.reason = where + ": unknown code; the GPU is suspect until it validates";
  } else {
    c.reason = where;
  }
  out.fatal = rule.effect == E::kDrain;
  out.reboot_level = rule.reboot_level;
  return out;
}

}  // namespace hangar::health
