// Xid errors: NVIDIA's catalogue of what each code means and what to do, and the per-GPU history
// that turns a stream of Xid events into findings.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <string_view>

#include "common/time.h"
#include "health/condition.h"
#include "health/fault_set.h"
#include "health/thresholds.h"

namespace hangar::health {

struct XidRule {
  uint64_t code = 0;
  std::string_view meaning;
  Effect effect = Effect::kSuspect;  // what one occurrence does
  Scope scope = Scope::kGpu;
  RecommendedAction action = RecommendedAction::kRunValidation;
  Clearing clearing = Clearing::kAfterQuiet;
  bool app_class = false;     // usually the application's fault: acts only when repeated on a GPU
  bool reboot_level = false;  // only a node reboot clears it
  bool known = true;
};

// The rule for `code`. Unknown codes get a warning (suspect, run validation) that fades after a
// day without a repeat.
XidRule XidRuleFor(uint64_t code);

// The Xids one GPU has raised over the last day, and what each new one means.
class XidHistory {
 public:
  struct Outcome {
    Finding finding;
    bool new_incident = true;  // false: the same Xid within `xid_incident` (`app_xid_incident`
                               // for 13/31/43) of the previous one: one incident
    bool fatal = false;        // counts toward "5 fatal Xids in 24 h"
    bool reboot_level = false;
  };

  // Judges Xid `code` on GPU `gpu` at time t. Xid 13/31/43 are informational once; the second
  // incident of the same code on the same GPU within `app_xid_window` makes the GPU suspect and
  // asks for validation. Repeats within `xid_incident` (`app_xid_incident` for the application
  // class) are one incident (drivers log bursts).
  Outcome Apply(uint16_t gpu, uint64_t code, Time t, const Thresholds& th);

 private:
  std::map<uint64_t, std::deque<Time>> incidents_;  // per code, newest last
};

}  // namespace hangar::health
