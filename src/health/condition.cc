#include "health/condition.h"

namespace hangar::health {

std::string_view SeverityName(Severity s) {
  switch (s) {
    case Severity::kInfo:
      return "info";
    case Severity::kWarning:
      return "warning";
    case Severity::kFatal:
      return "fatal";
  }
  return "?";
}

std::string_view EffectName(Effect e) {
  switch (e) {
    case Effect::kNone:
      return "none";
    case Effect::kSuspect:
      return "suspect";
    case Effect::kDegrade:
      return "degrade";
    case Effect::kDrain:
      return "drain";
  }
  return "?";
}

std::string_view ActionName(RecommendedAction a) {
  switch (a) {
    case RecommendedAction::kNone:
      return "none";
    case RecommendedAction::kWatch:
      return "watch";
    case RecommendedAction::kRestartApp:
      return "restart_app";
    case RecommendedAction::kRunValidation:
      return "run_validation";
    case RecommendedAction::kResetGpu:
      return "reset_gpu";
    case RecommendedAction::kDrainGpuAndReset:
      return "drain_gpu_and_reset";
    case RecommendedAction::kDrainGpuForRepair:
      return "drain_gpu_for_repair";
    case RecommendedAction::kDrainNodeAndReboot:
      return "drain_node_and_reboot";
    case RecommendedAction::kDrainNodeAndInspectFabric:
      return "drain_node_and_inspect_fabric";
    case RecommendedAction::kInspectHardware:
      return "inspect_hardware";
    case RecommendedAction::kFixConfig:
      return "fix_config";
    case RecommendedAction::kResetSafetyValve:
      return "reset_safety_valve";
  }
  return "?";
}

std::string_view StateName(HealthState s) {
  switch (s) {
    case HealthState::kHealthy:
      return "healthy";
    case HealthState::kSuspect:
      return "suspect";
    case HealthState::kDegraded:
      return "degraded";
    case HealthState::kPendingValidation:
      return "pending_validation";
    case HealthState::kDraining:
      return "draining";
    case HealthState::kQuarantined:
      return "quarantined";
    case HealthState::kFailed:
      return "failed";
  }
  return "?";
}

Severity SeverityOf(Effect e) {
  switch (e) {
    case Effect::kNone:
      return Severity::kInfo;
    case Effect::kSuspect:
    case Effect::kDegrade:
      return Severity::kWarning;
    case Effect::kDrain:
      return Severity::kFatal;
  }
  return Severity::kInfo;
}

bool IsSchedulable(HealthState s) {
  return s == HealthState::kHealthy || s == HealthState::kSuspect || s == HealthState::kDegraded;
}

std::string Condition::ToString() const {
  std::string out(SeverityName(severity()));
  out += ' ';
  out += type;
  out += gpu >= 0 ? " (GPU " + std::to_string(gpu) + ")" : std::string(" (node)");
  out += ": ";
  out += reason;
  if (action != RecommendedAction::kNone) {
    out += "; action: ";
    out += ActionName(action);
  }
  return out;
}

std::string Transition::ToString(std::string_view node_name) const {
  std::string out(node_name);
  if (gpu >= 0) out += " GPU " + std::to_string(gpu);
  out += ": ";
  out += StateName(from);
  out += " -> ";
  out += StateName(to);
  out += ": ";
  out += reason;
  return out;
}

}  // namespace hangar::health
