#include "health/subject.h"

#include <algorithm>

namespace hangar::health {
namespace {

std::string Describe(const Fault& f) {
  return f.finding.condition.type + ": " + f.finding.condition.reason;
}

void PruneBefore(std::vector<Time>& times, Time horizon) {
  auto keep = times.begin();
  while (keep != times.end() && *keep < horizon) ++keep;
  times.erase(times.begin(), keep);
}

}  // namespace

Subject::Subject(HealthState initial, Time t) : state_(initial), since_(t) {}

Subject::History& Subject::history() {
  if (!history_) history_ = std::make_unique<History>();
  return *history_;
}

void Subject::Cordon(std::string reason) {
  cordoned_ = true;
  history().cordon_reason = std::move(reason);
}

void Subject::WorkDrained(Time t) {
  if (state_ == HealthState::kDraining && t >= since_) work_drained_ = true;
}

void Subject::HardwareReset(Time t) {
  faults_.OnRemediation(t);
  // Nothing survives a reset or a reboot: whatever ran there is gone.
  if (state_ == HealthState::kDraining) work_drained_ = true;
}

void Subject::Remediated(Remedy r, Time t, std::string_view note) {
  HardwareReset(t);
  History& h = history();
  if (r == Remedy::kRepair) {
    std::string cordon_reason = std::move(h.cordon_reason);
    h = History{};
    h.cordon_reason = std::move(cordon_reason);
    h.repaired_at = t;
    h.repair_note = note;
    return;
  }
  h.remediations.push_back(t);
  if (r == Remedy::kNodeReboot) h.reboots.push_back(t);
}

void Subject::Validated(Time t, bool clean, bool fatal) {
  faults_.OnValidation(t, clean);
  if (fatal || t < validated_at_) return;
  validated_at_ = t;
  validated_clean_ = clean;
}

void Subject::RecordFatalXid(uint64_t code, bool reboot_level, Time t, const FailurePolicy& p) {
  History& h = history();
  h.fatal_xids.push_back(t);
  if (!reboot_level) return;
  PruneBefore(h.reboots, t - p.remediation_window);
  auto [it, inserted] = h.reboot_level_first.try_emplace(code, t);
  if (inserted || it->second < t - p.remediation_window) {
    it->second = t;
    return;
  }
  const Time first = it->second;  // a local: clang 14 cannot capture a structured binding
  auto reboots =
      std::count_if(h.reboots.begin(), h.reboots.end(), [&](Time r) { return r > first; });
  if (reboots >= p.reboots) {
    h.latched_failure = "Xid " + std::to_string(code) + " again after " + std::to_string(reboots) +
                        " reboots: the hardware needs inspection";
  }
}

void Subject::Restore(HealthState s, Time since, const std::string& reason) {
  state_ = s;
  since_ = since;
  if (s == HealthState::kFailed) history().latched_failure = reason;
}

bool Subject::WantsNewDrain() const {
  return IsSchedulable(state_) && (cordoned_ || faults_.WorstEffect() == Effect::kDrain);
}

bool Subject::DrainBypassesValve() const { return cordoned_ || faults_.DrainBypassesValve(); }

std::string Subject::FailureReason(Time now, const FailurePolicy& p) {
  if (!history_) return "";
  History& h = *history_;
  if (!h.latched_failure.empty()) return h.latched_failure;
  PruneBefore(h.fatal_xids, now - p.fatal_xid_window);
  PruneBefore(h.remediations, now - p.remediation_window);
  if (static_cast<int>(h.fatal_xids.size()) >= p.fatal_xids) {
    return std::to_string(h.fatal_xids.size()) + " fatal Xids within " +
           FormatDuration(p.fatal_xid_window) + ": out of the pool until repaired";
  }
  if (static_cast<int>(h.remediations.size()) >= p.remediations) {
    return std::to_string(h.remediations.size()) + " remediations within " +
           FormatDuration(p.remediation_window) + ": out of the pool until repaired";
  }
  return "";
}

std::optional<std::string> Subject::DrainReason() const {
  if (cordoned_)
    return "drained by operator: " + (history_ ? history_->cordon_reason : std::string());
  const Fault* worst = faults_.WorstOpen();
  if (worst != nullptr && worst->finding.condition.effect == Effect::kDrain) {
    return Describe(*worst);
  }
  return std::nullopt;
}

// The in-pool state its open warnings call for, and the warning(s) behind it.
std::pair<HealthState, std::string> Subject::InPoolState(Time now, const SubjectPolicy& p) const {
  std::vector<const Fault*> suspect;
  for (const Fault* f : faults_.Open()) {
    Effect e = f->finding.condition.effect;
    if (e == Effect::kDegrade || e == Effect::kDrain) return {HealthState::kDegraded, Describe(*f)};
    if (e == Effect::kSuspect) suspect.push_back(f);
  }
  if (suspect.size() >= 2) {
    return {HealthState::kDegraded, std::to_string(suspect.size()) + " warnings at once: " +
                                        Describe(*suspect[0]) + "; " + Describe(*suspect[1])};
  }
  if (suspect.size() == 1) {
    int n = p.failure.repeated_warning_openings;
    if (faults_.Repeated(Effect::kSuspect, n, now)) {
      return {HealthState::kDegraded, Describe(*suspect[0]) + " (opened " + std::to_string(n) +
                                          " times within " + FormatDuration(FaultSet::kMemory) +
                                          ")"};
    }
    return {HealthState::kSuspect, Describe(*suspect[0])};
  }
  return {HealthState::kHealthy, ""};
}

std::pair<HealthState, std::string> Subject::Target(Time now, const SubjectPolicy& p,
                                                    std::string_view held) {
  auto back_in_pool = [&](std::string why) -> std::pair<HealthState, std::string> {
    auto [s, driver] = InPoolState(now, p);
    return {s, driver.empty() ? why : why + "; still " + driver};
  };
  if (state_ == HealthState::kFailed) {
    if (!history_ || history_->repaired_at < since_) return {state_, ""};
    const std::string& note = history_->repair_note;
    std::string why = "repaired" + (note.empty() ? "" : ": " + note);
    if (p.require_validation) return {HealthState::kPendingValidation, why};
    return back_in_pool(why);
  }
  std::string failure = FailureReason(now, p.failure);
  if (!failure.empty()) return {HealthState::kFailed, failure};
  std::optional<std::string> drain = DrainReason();
  switch (state_) {
    case HealthState::kDraining:
      if (!work_drained_) return {state_, ""};
      return {HealthState::kQuarantined,
              "work drained; awaiting remediation" + (drain ? ": " + *drain : "")};
    case HealthState::kQuarantined:
      if (drain) return {state_, ""};
      if (p.require_validation) {
        return {HealthState::kPendingValidation, "faults cleared; validation required before work"};
      }
      return back_in_pool("faults cleared");
    case HealthState::kPendingValidation:
      if (drain) return {HealthState::kQuarantined, *drain};
      if (p.require_validation && validated_at_ < since_) return {state_, ""};
      if (!p.require_validation) return back_in_pool("validation not required");
      return back_in_pool(validated_clean_ ? "validation passed"
                                           : "validation done, with findings");
    default:
      if (!drain) return InPoolState(now, p);
      if (!held.empty() && !DrainBypassesValve())
        return {HealthState::kDegraded, std::string(held)};
      return {HealthState::kDraining, *drain};
  }
}

std::optional<Subject::Step> Subject::Advance(Time now, const SubjectPolicy& p,
                                              std::string_view held) {
  auto [to, reason] = Target(now, p, held);
  if (to == state_) return std::nullopt;
  Step step{state_, to, std::move(reason)};
  if (to == HealthState::kDraining) work_drained_ = false;
  state_ = to;
  since_ = now;
  return step;
}

}  // namespace hangar::health
