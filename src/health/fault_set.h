// FaultSet: the open faults of one subject (a GPU or a node), each opened by a rule's Finding and
// closed by the policy the rule chose (Clearing). Closed faults are remembered for a day so that a
// warning that keeps coming back counts as "repeated".
//
// Not thread-safe; owned by the engine's single thread.
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "common/time.h"
#include "health/condition.h"

namespace hangar::health {

// How a fault closes.
enum class Clearing : uint8_t {
  kWhileObserved,  // a level: open while the latest observation shows it, closed when it doesn't
  kAfterQuiet,     // a rate or an event: closes after `quiet` without a new observation, or on a
                   // passing validation or a remediation
  kOnRemediation,  // latched: closes only on a remediation recorded after it was last seen
  kOnValidation,   // a benchmark verdict: closes on the next passing validation (or remediation)
};

// What a rule says about one subject now.
struct Finding {
  std::string key;      // unique within a subject: "xid_48", "ib_mlx5_0_1_link_downed"
  Condition condition;  // since and last_seen are filled in by the FaultSet
  Clearing clearing = Clearing::kWhileObserved;
  Duration quiet = 0;           // kAfterQuiet only
  bool bypasses_valve = false;  // a fact, not a judgement (a lost node): never held back
};

struct Fault {
  Finding finding;
  bool open = false;
  Time closed_at = 0;
  std::vector<Time> openings;  // when it opened, over the last day
};

class FaultSet {
 public:
  // How long closed faults are remembered, and the window for counting repeated openings.
  static constexpr Duration kMemory = kDay;

  // Opens the fault `f.key` or refreshes it (reason, last_seen); returns true when it opened. An
  // observation made before the last remediation cannot reopen a fault that closes on
  // remediation: it predates the fix.
  bool Assert(const Finding& f, Time t);
  // Closes a kWhileObserved fault: its rule looked at time t and no longer sees it.
  void Resolve(std::string_view key, Time t);
  // Closes kAfterQuiet faults quiet for their period; forgets faults closed over kMemory ago.
  void Expire(Time now);
  // A remediation at t closes everything but levels (a level shows itself in the next sample).
  void OnRemediation(Time t);
  // A validation finished at t: its verdict replaces the last one, so kOnValidation faults close
  // (the engine reasserts what is still wrong); when it passed, kAfterQuiet faults close too.
  void OnValidation(Time t, bool passed);

  Effect WorstEffect() const;
  // The open fault with the strongest effect (earliest first among equals); nullptr when no open
  // fault has an effect.
  const Fault* WorstOpen() const;
  int CountOpen(Effect e) const;
  // True when an open fault with effect `e` opened at least `n` times within kMemory of now.
  bool Repeated(Effect e, int n, Time now) const;
  // True when every open fault with effect kDrain bypasses the safety valve.
  bool DrainBypassesValve() const;
  std::vector<const Fault*> Open() const;  // in key order
  const Fault* Find(std::string_view key) const;

  // Set when a fault opens, closes or changes effect; the engine clears it after reporting.
  bool changed() const { return changed_; }
  // No fault at all, open or remembered.
  bool empty() const { return faults_.empty(); }
  void ClearChanged() { changed_ = false; }
  Time last_remediation() const { return last_remediation_; }

 private:
  void Close(Fault& f, Time t);

  std::map<std::string, Fault, std::less<>> faults_;
  Time last_remediation_ = -1;
  bool changed_ = false;
};

}  // namespace hangar::health
