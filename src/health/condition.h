// The vocabulary of health: what a rule found (a Condition), what it does to its subject (an
// Effect), what someone should do about it (a RecommendedAction), and the states a GPU or a node
// moves through (HealthState). Pure values; no module state.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "common/time.h"

namespace hangar::health {

enum class Severity : uint8_t { kInfo, kWarning, kFatal };

// What one condition does to its subject on its own. The severity follows from it: kNone is
// info, kSuspect and kDegrade are warnings, kDrain is fatal.
enum class Effect : uint8_t {
  kNone,     // reported only
  kSuspect,  // still schedulable, ranked last
  kDegrade,  // schedulable, but no new multi-task gangs
  kDrain,    // checkpoint and move running work, then quarantine
};

// Whom a condition acts on: the GPU it came from, or the whole node (Xid 79, the fabric, ...).
enum class Scope : uint8_t { kGpu, kNode };

enum class RecommendedAction : uint8_t {
  kNone,
  kWatch,                      // record; act only if it repeats
  kRestartApp,                 // the application's context died; the hardware is fine
  kRunValidation,              // benchmark the GPU/node before trusting it again
  kResetGpu,                   // reset the GPU at its next idle moment; no need to evict work
  kDrainGpuAndReset,           // take the GPU out, move its work, reset it
  kDrainGpuForRepair,          // take the GPU out for good: RMA / replace
  kDrainNodeAndReboot,         // take the node out, move its work, reboot it
  kDrainNodeAndInspectFabric,  // take the node out; check cable, transceiver, switch port
  kInspectHardware,            // reseat or inspect (PCIe link, cooling)
  kFixConfig,                  // bring driver/CUDA/kernel/OFED back to the baseline
  kResetSafetyValve,           // an operator must look, then reset the fleet safety valve
};

enum class HealthState : uint8_t {
  kHealthy,
  kSuspect,            // one warning: schedulable, ranked last
  kDegraded,           // repeated warnings or a validation outlier: no new gangs
  kPendingValidation,  // new, or back from remediation: takes no job until validation passes
  kDraining,           // a fatal signal: running work is checkpointed and moved
  kQuarantined,        // drained: awaiting remediation, then validation
  kFailed,             // out of the pool after repeated failures; needs a repair
};

std::string_view SeverityName(Severity s);  // "info", "warning", "fatal"
std::string_view EffectName(Effect e);      // "none", "suspect", "degrade", "drain"
std::string_view ActionName(RecommendedAction a);
std::string_view StateName(HealthState s);  // "healthy", "pending_validation", ...
Severity SeverityOf(Effect e);

// True for the states in which new work may be placed (subject to gangs_allowed).
bool IsSchedulable(HealthState s);

struct Condition {
  std::string type;  // stable snake_case name: "xid_79", "pcie_link_degraded", "ib_link_downed"
  Effect effect = Effect::kNone;
  Scope scope = Scope::kGpu;
  int gpu = -1;        // the GPU (ordinal within its node) it came from; -1 when node-wide
  Time since = 0;      // when this episode began
  Time last_seen = 0;  // the latest observation that showed it
  std::string reason;  // a sentence with the numbers
  RecommendedAction action = RecommendedAction::kNone;

  Severity severity() const { return SeverityOf(effect); }
  // "fatal xid_79 (GPU 3): GPU 3 fell off the bus (Xid 79); action: drain_node_and_reboot"
  std::string ToString() const;
};

// One change of a GPU's or a node's state, with why (for `hangar events` / `hangar node NAME`).
struct Transition {
  uint32_t node = 0;  // node index in the Topology
  int gpu = -1;       // GPU ordinal within the node; -1 for the node itself
  HealthState from = HealthState::kHealthy;
  HealthState to = HealthState::kHealthy;
  Time at = 0;
  std::string reason;

  // "node-7 GPU 3: healthy -> draining: ..." given the node's name.
  std::string ToString(std::string_view node_name) const;
};

}  // namespace hangar::health
