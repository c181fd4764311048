#include "controller/service/replica.h"

#include <utility>

namespace hangar::controller::service {

std::string_view ReplicaStateName(ReplicaState s) {
  switch (s) {
    case ReplicaState::kPending:
      return "pending";
    case ReplicaState::kStarting:
      return "starting";
    case ReplicaState::kReady:
      return "ready";
    case ReplicaState::kDraining:
      return "draining";
    case ReplicaState::kStopping:
      return "stopping";
    case ReplicaState::kBackoff:
      return "backoff";
    case ReplicaState::kGone:
      return "gone";
  }
  return "unknown";
}

namespace {

using S = ReplicaState;

bool Allowed(S from, S to) {
  switch (from) {
    case S::kPending:
      return to == S::kStarting || to == S::kStopping || to == S::kBackoff;
    case S::kStarting:
      return to == S::kReady || to == S::kPending || to == S::kStopping || to == S::kBackoff;
    case S::kReady:
      return to == S::kStarting || to == S::kPending || to == S::kDraining || to == S::kBackoff ||
             to == S::kStopping;
    case S::kDraining:
      return to == S::kStopping || to == S::kPending || to == S::kBackoff || to == S::kGone;
    case S::kStopping:  // to kBackoff: stopped to be restarted (its liveness probe failed)
      return to == S::kGone || to == S::kBackoff;
    case S::kBackoff:
      return to == S::kPending || to == S::kGone;
    case S::kGone:
      return false;
  }
  return false;
}

}  // namespace

Status Transition(const std::string& service, int slot, Replica* r, ReplicaState to, Time now,
                  std::string why, TransitionEffects* fx) {
  const S from = r->state;
  if (!Allowed(from, to)) {
    return Status::FailedPrecondition("replica " + std::to_string(r->id) + " of " + service +
                                      " cannot go from " + std::string(ReplicaStateName(from)) +
                                      " to " + std::string(ReplicaStateName(to)));
  }
  // The load balancer first: a replica is in rotation exactly while it is ready, and leaves it by
  // draining whenever it still runs.
  if (to == S::kReady) {
    fx->lb.push_back({slot, r->server, LbChange::Op::kEnable, r->address, r->port});
  } else if (from == S::kReady && to == S::kDraining) {
    fx->lb.push_back({slot, r->server, LbChange::Op::kDrain, "", 0});
  } else if (from == S::kReady || from == S::kDraining) {
    fx->lb.push_back({slot, r->server, LbChange::Op::kDisable, "", 0});
  }
  if (to == S::kStopping && r->job) fx->stops.push_back({service, r->id, r->job});
  if (to == S::kReady) {
    r->ever_ready = true;
    r->crashes = 0;
  }
  if (to == S::kStarting || to == S::kPending) r->passes = r->failures = 0;
  if (to == S::kPending || to == S::kBackoff) r->live_failures = 0;
  r->state = to;
  r->since = now;
  r->why = std::move(why);
  return Status::Ok();
}

}  // namespace hangar::controller::service
