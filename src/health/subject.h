// Subject: one GPU or one node going through the health state machine.
//
//   healthy -> suspect        one open warning (still schedulable, ranked last)
//           -> degraded       a degrading finding (validation outlier, hardware slowdown, fabric
//                             error rate, config drift), two warnings at once, or one warning that
//                             opened 3 times in a day (no new gangs)
//           -> draining       a fatal finding or an operator cordon (work is checkpointed and
//                             moved; the controller reports kWorkDrained when it is gone)
//   draining -> quarantined   once the work is gone
//   quarantined -> pending_validation   once no fatal finding is open and no cordon holds
//   pending_validation -> healthy (or suspect/degraded, by its open warnings)   when a
//                             validation without a fatal finding finishes after it entered
//                             pending_validation (a fleet outlier comes back degraded)
//   any -> failed             5 fatal Xids in 24 h, 5 remediations in 7 days, or the same
//                             reboot-level Xid after 2 reboots; only a repair brings it back
//                             (to pending_validation).
// Once a subject leaves the pool (draining) it comes back only through quarantine and
// validation, so "healthy" always means "every open fault cleared and validation passed".
// With require_validation off, pending_validation is skipped.
//
// Not thread-safe; owned by the engine.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/time.h"
#include "health/condition.h"
#include "health/fault_set.h"
#include "health/inputs.h"

namespace hangar::health {

struct FailurePolicy {
  int fatal_xids = 5;  // fatal Xid incidents within fatal_xid_window: failed (NVSentinel)
  Duration fatal_xid_window = kDay;
  int remediations = 5;  // remediations within remediation_window: failed (NVSentinel)
  Duration remediation_window = 7 * kDay;
  int reboots = 2;                    // a reboot-level Xid again after this many reboots (gpud)
  int repeated_warning_openings = 3;  // one warning opening this often in a day: degraded
};

struct SubjectPolicy {
  FailurePolicy failure;
  bool require_validation = true;
};

class Subject {
 public:
  Subject(HealthState initial, Time t);

  FaultSet& faults() { return faults_; }
  const FaultSet& faults() const { return faults_; }
  HealthState state() const { return state_; }
  Time state_since() const { return since_; }
  bool cordoned() const { return cordoned_; }
  // Healthy with nothing that time alone could change: no fault (open or remembered), no cordon,
  // no failure history. Only a new input moves such a subject.
  bool AtRest() const {
    return state_ == HealthState::kHealthy && faults_.empty() && !cordoned_ &&
           (history_ == nullptr || history_->Empty());
  }

  void Cordon(std::string reason);
  void Uncordon() { cordoned_ = false; }
  // The controller moved every task off. Counts only while draining.
  void WorkDrained(Time t);
  // The hardware was reset at t as part of a bigger remediation (a node reboot resets its GPUs):
  // closes latched faults without counting toward the failure policy.
  void HardwareReset(Time t);
  // A remediation finished at t: closes latched faults and counts toward the failure policy.
  // A repair also forgets the failure history and brings a failed subject back.
  void Remediated(Remedy r, Time t, std::string_view note);
  // A validation covering this subject finished at t (the engine asserts its findings next).
  // `clean`: it found nothing; `fatal`: it found something that fails the subject (a floor). Any
  // validation without a fatal finding is the one a subject pending validation waits for: it goes
  // back to the pool in the state its open warnings call for (an outlier: degraded). Only a clean
  // one also closes the warnings that wait for a quiet period.
  void Validated(Time t, bool clean, bool fatal = false);
  // A fatal Xid incident, for "5 fatal Xids in 24 h" and the reboot-level rule.
  void RecordFatalXid(uint64_t code, bool reboot_level, Time t, const FailurePolicy& p);
  // Puts the subject in `s` after a controller restart; a failed one stays failed for `reason`.
  void Restore(HealthState s, Time since, const std::string& reason);

  // True when the subject is in the pool and something would now take it out: the engine asks
  // the safety valve first, unless DrainBypassesValve().
  bool WantsNewDrain() const;
  // An operator cordon or a fact (a lost node) that no fleet-level valve may hold back.
  bool DrainBypassesValve() const;

  struct Step {
    HealthState from;
    HealthState to;
    std::string reason;
  };
  // Moves to the state that its faults, history and the controller's reports call for; nullopt
  // when it stays. `held`: non-empty when the safety valve held back a new drain (why).
  std::optional<Step> Advance(Time now, const SubjectPolicy& p, std::string_view held);

 private:
  std::string FailureReason(Time now, const FailurePolicy& p);
  std::optional<std::string> DrainReason() const;
  std::pair<HealthState, std::string> InPoolState(Time now, const SubjectPolicy& p) const;
  std::pair<HealthState, std::string> Target(Time now, const SubjectPolicy& p,
                                             std::string_view held);

  // What a healthy subject never needs: operator notes and failure history. Most subjects of a
  // fleet never get one, so it lives behind a pointer (a Subject is 96 bytes instead of 336).
  struct History {
    std::string cordon_reason;
    Time repaired_at = -1;
    std::string repair_note;
    std::string latched_failure;                  // the reboot-level rule, once it fired
    std::vector<Time> fatal_xids;                 // incident times within the window, oldest first
    std::vector<Time> remediations;               // times within the window
    std::vector<Time> reboots;                    // node reboots, last 7 days
    std::map<uint64_t, Time> reboot_level_first;  // reboot-level Xid -> first seen
    bool Empty() const {
      return fatal_xids.empty() && remediations.empty() && reboots.empty() &&
             latched_failure.empty();
    }
  };
  History& history();  // created on first use

  FaultSet faults_;
  HealthState state_;
  bool cordoned_ = false;
  bool work_drained_ = false;
  bool validated_clean_ = false;  // ... and whether it found nothing at all
  Time since_;
  Time validated_at_ = -1;  // the latest validation without a fatal finding
  std::unique_ptr<History> history_;
};

}  // namespace hangar::health
