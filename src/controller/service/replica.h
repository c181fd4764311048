// A service replica and its state machine. A replica is one job of one task (placed and preempted
// as a one-task gang); the replica outlives its jobs: when its process ends unasked it waits out a
// back-off and runs again as a new job, keeping its id. Its state changes only through
// Transition, which also says what the load balancer and the job must do about the change, so
// that "leaves rotation before it is stopped" holds by construction.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "common/time.h"

namespace hangar::controller::service {

enum class ReplicaState {
  kPending,   // its job waits to be placed (or was requeued)
  kStarting,  // its process runs; not in rotation until the readiness probe passes
  kReady,     // in rotation
  kDraining,  // out of rotation for new requests; those in flight finish (within drain_grace)
  kStopping,  // its job was told to stop; gone once the job has ended
  kBackoff,   // its process ended unasked; it runs again at restart_at
  kGone,      // ended and forgotten at the end of the round
};
std::string_view ReplicaStateName(ReplicaState s);

// What the load balancer must do with a replica's server slot.
struct LbChange {
  enum class Op { kEnable, kDrain, kDisable };
  int slot = 0;    // the service's backend
  int server = 0;  // the replica's server in it (1-based)
  Op op = Op::kDisable;
  std::string address;  // kEnable: where the replica listens
  int port = 0;
  bool operator==(const LbChange&) const = default;
};

struct JobStop {
  std::string service;
  int replica = 0;
  uint64_t job = 0;
};

struct Replica {
  int id = 0;
  int revision = 0;
  uint64_t job = 0;     // the current job; 0 while in back-off
  int port = 0;         // HANGAR_PORT
  int server = 0;       // its server in the service's backend
  std::string address;  // where it listens, once its process runs
  std::string node;     // where its task runs, and the task's id (command probes), as last seen
  std::string task_id;
  ReplicaState state = ReplicaState::kPending;
  bool removing = false;  // the service no longer wants it: it ends instead of restarting
  // Its liveness probe failed: it is drained, stopped, and restarted after its back-off (it stays
  // counted towards the service's size meanwhile).
  bool relaunch = false;
  Time since = 0;       // when it entered its state
  Time started = 0;     // when its current process began
  Time restart_at = 0;  // kBackoff
  Time next_probe = 0;
  int passes = 0, failures = 0;  // readiness results in a row
  Time live_from = 0;            // liveness is probed from then on (initial_delay, or ready)
  Time next_live_probe = 0;
  int live_failures = 0;  // liveness failures in a row
  int crashes = 0;        // ends in a row since it was last ready
  uint32_t restarts = 0;
  bool ever_ready = false;
  bool guaranteed = true;  // false: opportunistic (above an autoscaled service's min)
  std::string why;         // what moved it last
};

// What a transition asks of the world.
struct TransitionEffects {
  std::vector<LbChange> lb;
  std::vector<JobStop> stops;
};

// The one door: checks that `from -> to` is a step of the machine, records when and why, and
// appends what the load balancer and the job must do. Illegal steps are refused unchanged.
Status Transition(const std::string& service, int slot, Replica* r, ReplicaState to, Time now,
                  std::string why, TransitionEffects* fx);

}  // namespace hangar::controller::service
