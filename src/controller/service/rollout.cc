// ServiceBook's rounds: restarts, drains, rollouts and scaling (service_book.h).
#include <algorithm>

#include "controller/service/service_book.h"

namespace hangar::controller::service {
namespace {

// A replica still counted towards the service's size (one being restarted for failing liveness
// is: it comes back by itself).
bool Active(const Replica& r) {
  return !r.removing &&
         (r.relaunch || r.state == ReplicaState::kPending || r.state == ReplicaState::kStarting ||
          r.state == ReplicaState::kReady || r.state == ReplicaState::kBackoff);
}

std::vector<Replica*> ActiveOf(Service& s) {
  std::vector<Replica*> out;
  for (Replica& r : s.replicas) {
    if (Active(r)) out.push_back(&r);
  }
  return out;
}

// Which replica goes first: another revision's before the wanted one's, one not ready before one
// that is, the newest first.
void SortForRemoval(const Service& s, std::vector<Replica*>* v, int want) {
  std::sort(v->begin(), v->end(), [&s, want](const Replica* a, const Replica* b) {
    const auto key = [&s, want](const Replica* r) {
      return std::make_tuple(s.Runs(*r, want), r->guaranteed, r->state == ReplicaState::kReady,
                             -r->id);
    };
    return key(a) < key(b);
  });
}

constexpr Duration kMinDrain =
    200;  // the load balancer has taken the drain in before we trust its counts
constexpr int kCrashesBeforeFailed = 3;

}  // namespace

bool ServiceBook::Stopped(const Service& s) {
  return s.Target().state == "failed" && s.last_good != 0;
}

int ServiceBook::Want(const Service& s) { return Stopped(s) ? s.last_good : s.target; }

Plan ServiceBook::Round(Time now) {
  for (auto& [name, s] : services_) Reconcile(s, now);
  for (auto it = services_.begin(); it != services_.end();) {
    Service& s = it->second;
    std::erase_if(s.replicas, [](const Replica& r) { return r.state == ReplicaState::kGone; });
    if (s.deleting && s.replicas.empty()) {
      released_[s.slot] = now;
      plan_.erased.insert(it->first);
      plan_.changed.erase(it->first);
      it = services_.erase(it);
    } else {
      ++it;
    }
  }
  Plan out = std::move(plan_);
  plan_ = Plan{};
  return out;
}

void ServiceBook::Reconcile(Service& s, Time now) {
  FinishDrains(s, now);
  if (s.deleting) {
    for (Replica& r : s.replicas) {
      if (!r.removing) Remove(s, r, now, "the service is being deleted");
    }
    return;
  }
  CheckProgress(s, now);
  Autoscale(s, now);
  const int want = Want(s);
  for (Replica& r : s.replicas) {
    // A replica of another revision is replaced by the rollout rather than restarted.
    if (r.state == ReplicaState::kBackoff && !r.removing && s.Runs(r, want) &&
        now >= r.restart_at) {
      Restart(s, r, now);
    }
  }
  Roll(s, now);
}

void ServiceBook::Restart(Service& s, Replica& r, Time now) {
  // The stopped incarnation may hold its port a moment longer (its job reads cancelled while its
  // process ends within its stop grace): the new one then takes another, rather than failing to
  // bind and crashing once more. The load balancer learns the port when it is ready.
  if (options_.port_usable && !options_.port_usable(r.port)) {
    if (const int port = PickPort()) r.port = port;
  }
  plan_.starts.push_back({s.name, r.id, r.revision, r.port, !r.guaranteed});
  (void)Move(s, r, ReplicaState::kPending, now, "restarted after back-off");
}

int ServiceBook::AddReplica(Service& s, int revision, Time now) {
  const int port = PickPort(), server = PickServer(s);
  if (!port || !server) return 0;
  Replica r;
  const AutoscaleSpec& a = s.Target().options.autoscale;
  int guaranteed = 0;
  for (const Replica& x : s.replicas) guaranteed += Active(x) && x.guaranteed ? 1 : 0;
  r.guaranteed = !a.on || guaranteed < a.min;
  r.id = s.next_replica++;
  r.revision = revision;
  r.port = port;
  r.server = server;
  r.state = ReplicaState::kPending;
  r.since = now;
  r.why = "created for revision " + std::to_string(revision);
  s.replicas.push_back(r);
  plan_.starts.push_back({s.name, r.id, revision, port, !r.guaranteed});
  plan_.changed.insert(s.name);
  return r.id;
}

void ServiceBook::Autoscale(Service& s, Time now) {
  const AutoscaleSpec& a = s.Target().options.autoscale;
  if (!a.on) return;
  // A slot a deleted service gave back: its figures (a rate over the last second, read every
  // round) are that service's until they have been read again after it left.
  if (auto freed = released_.find(s.slot); freed != released_.end()) {
    if (now < freed->second + kReadingsSettle) return;
    released_.erase(freed);
  }
  // Each target's count, from what the load balancer said; both must have been read.
  int want = a.min;
  std::string why;
  auto recommend = [&](const std::map<int, long>& seen, long per, const char* what) {
    auto it = seen.find(s.slot);
    if (it == seen.end()) return false;
    const int n = static_cast<int>(std::clamp<long>((it->second + per - 1) / per, a.min, a.max));
    if (why.empty() || n > want) {
      why = std::to_string(it->second) + " " + what + ", " + std::to_string(per) +
            " per replica wanted";
    }
    want = std::max(want, n);
    return true;
  };
  if (a.in_flight_per_replica &&
      !recommend(in_flight_, a.in_flight_per_replica, "requests in flight"))
    return;
  if (a.rps_per_replica && !recommend(rps_, a.rps_per_replica, "requests per second")) return;
  // The highest recommendation of the window: up at once, down only once the window agrees.
  s.recommendations.emplace_back(now, want);
  std::erase_if(s.recommendations,
                [&](const auto& r) { return r.first < now - a.scale_down_after; });
  int desired = a.min;
  for (const auto& r : s.recommendations) desired = std::max(desired, r.second);
  if (desired == s.desired) return;
  s.scale_note = why + ": " + std::to_string(desired) + " replicas (within " +
                 std::to_string(a.min) + "-" + std::to_string(a.max) +
                 (desired < s.desired ? ", lower for " + FormatDuration(a.scale_down_after) : "") +
                 ")";
  s.desired = desired;
  plan_.changed.insert(s.name);
}

void ServiceBook::Remove(Service& s, Replica& r, Time now, const std::string& why) {
  r.removing = true;
  plan_.changed.insert(s.name);
  switch (r.state) {
    case ReplicaState::kReady:
      (void)Move(s, r, ReplicaState::kDraining, now, why + ": draining");
      break;
    case ReplicaState::kPending:
    case ReplicaState::kStarting:
      (void)Move(s, r, ReplicaState::kStopping, now, why);
      if (!r.job) (void)Move(s, r, ReplicaState::kGone, now, why);
      break;
    case ReplicaState::kBackoff:
      (void)Move(s, r, ReplicaState::kGone, now, why);
      break;
    default:
      break;  // already on its way out
  }
}

void ServiceBook::FinishDrains(Service& s, Time now) {
  for (Replica& r : s.replicas) {
    if (r.state != ReplicaState::kDraining || !(r.removing || r.relaunch)) continue;
    const Duration grace = s.OptionsOf(r).drain_grace;
    auto in_flight = sessions_.find({s.slot, r.server});
    const bool idle =
        in_flight != sessions_.end() && in_flight->second == 0 && now - r.since >= kMinDrain;
    if (!idle && now - r.since < grace) continue;
    (void)Move(s, r, ReplicaState::kStopping, now,
               r.relaunch ? r.why + (idle ? "; drained" : "; drain grace over")
                          : (idle ? "drained" : "drain grace over"));
    if (!r.job) (void)Move(s, r, ReplicaState::kGone, now, "drained");
  }
}

void ServiceBook::CheckProgress(Service& s, Time now) {
  Revision& t = s.Target();
  if (t.state != "rolling out") return;
  for (const Replica& r : s.replicas) {
    if (r.revision != s.target || r.removing || r.ever_ready) continue;
    std::string why;
    if (r.state == ReplicaState::kStarting &&
        now - r.started > t.options.update.progress_deadline) {
      why = "replica " + std::to_string(r.id) + " was not ready " +
            FormatDuration(t.options.update.progress_deadline) + " after it started (" + r.why +
            ")";
    } else if (r.crashes >= kCrashesBeforeFailed) {
      // The last crash's words, without the back-off that follows them.
      const std::string last = r.why.substr(0, r.why.find("; restarts in"));
      why = "replica " + std::to_string(r.id) + " ended " + std::to_string(r.crashes) +
            " times before it was ever ready (" + last + ")";
    }
    if (why.empty()) continue;
    t.state = "failed";
    t.note = why + "; the rollout stopped (" +
             (s.last_good ? "`hangar service rollback " + s.name + "` restores revision " +
                                std::to_string(s.last_good)
                          : "no revision of it was ever ready: fix the file and `hangar service "
                            "update " +
                                s.name + " -f FILE`, or delete it") +
             ")";
    plan_.changed.insert(s.name);
    return;
  }
}

void ServiceBook::Roll(Service& s, Time now) {
  const bool stopped = Stopped(s);
  if (stopped) {
    for (Replica& r : s.replicas) {
      if (!r.removing && r.revision == s.target && r.state != ReplicaState::kReady) {
        Remove(s, r, now, "revision " + std::to_string(s.target) + " did not become ready");
      }
    }
  }
  const int want = Want(s), n = s.desired;
  const UpdateSpec& u = s.Target().options.update;
  for (size_t have = ActiveOf(s).size(); static_cast<int>(have) < n; ++have) {
    if (!AddReplica(s, want, now)) break;
  }
  auto count = [&](auto pred) {
    int c = 0;
    for (Replica* r : ActiveOf(s)) c += pred(*r) ? 1 : 0;
    return c;
  };
  auto is_old = [&s, want](const Replica& r) { return !s.Runs(r, want); };
  // Surge: new replicas beside the old, within max_surge.
  while (!stopped) {
    const int total = static_cast<int>(ActiveOf(s).size()), old = count(is_old);
    if (old == 0 || total - old >= n || total >= n + u.max_surge) break;
    if (!AddReplica(s, want, now)) break;
  }
  // Replace: take old replicas out while enough stay ready.
  if (!stopped) {
    std::vector<Replica*> old;
    for (Replica* r : ActiveOf(s)) {
      if (is_old(*r)) old.push_back(r);
    }
    SortForRemoval(s, &old, want);
    int ready = count([](const Replica& r) { return r.state == ReplicaState::kReady; });
    for (Replica* r : old) {
      const bool was_ready = r->state == ReplicaState::kReady;
      if (was_ready && ready - 1 < n - u.max_unavailable) continue;
      Remove(s, *r, now, "replaced by revision " + std::to_string(want));
      ready -= was_ready ? 1 : 0;
    }
  }
  // Trim above the count (scaled down, or a surge done).
  std::vector<Replica*> all = ActiveOf(s);
  const int limit = !stopped && count(is_old) > 0 ? n + u.max_surge : n;
  SortForRemoval(s, &all, want);
  for (size_t i = 0; static_cast<int>(all.size() - i) > limit; ++i)
    Remove(s, *all[i], now, "scaled down");
  // Done: every replica runs the target and enough are ready.
  Revision& t = s.Target();
  if (!stopped && t.state == "rolling out" && count(is_old) == 0 &&
      count([](const Replica& r) { return r.state == ReplicaState::kReady; }) >= n) {
    t.state = "complete";
    t.good = true;
    for (auto& r : s.revisions) {
      if (r.number != t.number && r.state == "complete") r.state = "superseded";
    }
    s.last_good = t.number;
    plan_.changed.insert(s.name);
  }
}

}  // namespace hangar::controller::service
