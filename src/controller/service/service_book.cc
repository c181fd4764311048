#include "controller/service/service_book.h"

#include <algorithm>
#include <utility>

#include "job/job_state.h"

namespace hangar::controller::service {

const Revision& Service::Target() const { return *Find(target); }

const Revision* Service::Find(int revision) const {
  for (const auto& r : revisions) {
    if (r.number == revision) return &r;
  }
  return nullptr;
}

bool Service::Runs(const Replica& r, int want) const {
  return r.revision == want || Find(r.revision)->replica == Find(want)->replica;
}

const ServiceOptions& Service::OptionsOf(const Replica& r) const {
  return Runs(r, target) ? Target().options : Find(r.revision)->options;
}

ServiceBook::ServiceBook(BookOptions options) : options_(std::move(options)) {}

const Service* ServiceBook::Find(const std::string& name) const {
  auto it = services_.find(name);
  return it == services_.end() ? nullptr : &it->second;
}

Service* ServiceBook::Mutable(const std::string& name) {
  auto it = services_.find(name);
  return it == services_.end() || it->second.deleting ? nullptr : &it->second;
}

namespace {

// A job's message as a replica's "why" carries it: its first line, at most 200 characters.
std::string Clip(const std::string& message) {
  std::string line = message.substr(0, message.find('\n'));
  return line.size() > 200 ? line.substr(0, 197) + "..." : line;
}

Status NoSuchService(const std::string& name) {
  return Status::NotFound("service '" + name +
                          "' does not exist; `hangar service list` lists them");
}

}  // namespace

// A free slot: one no service has used yet, else the one given back longest ago.
std::optional<int> ServiceBook::PickSlot() const {
  std::set<int> used;
  for (const auto& [name, s] : services_) used.insert(s.slot);
  std::optional<int> best;
  for (int slot = 0; slot < options_.slots; ++slot) {
    if (used.count(slot)) continue;
    auto freed = released_.find(slot);
    if (freed == released_.end()) return slot;
    if (!best || freed->second < released_.at(*best)) best = slot;
  }
  return best;
}

Status ServiceBook::Create(const ServiceSpec& spec, const nlohmann::json& replica_json,
                           const std::string& user, Time wall) {
  if (services_.count(spec.name)) {
    return Status::AlreadyExists("service '" + spec.name +
                                 "' exists; change it with `hangar service update " + spec.name +
                                 " -f FILE`, or delete it first");
  }
  auto slot = PickSlot();
  if (!slot) {
    return Status::ResourceExhausted(
        "the load balancer's " + std::to_string(options_.slots) +
        " service endpoints are all in use; delete a service, or give the controller "
        "more with --service-lb-endpoints");
  }
  Service s;
  s.name = spec.name;
  s.user = user;
  s.slot = *slot;
  s.desired = spec.options.replicas;
  s.target = 1;
  s.revisions.push_back({1, spec.options, replica_json, wall, "rolling out", ""});
  services_[spec.name] = std::move(s);
  plan_.changed.insert(spec.name);
  return Status::Ok();
}

StatusOr<int> ServiceBook::Update(const ServiceSpec& spec, const nlohmann::json& replica_json,
                                  Time wall) {
  Service* s = Mutable(spec.name);
  if (!s) return NoSuchService(spec.name);
  const Revision& now = s->Target();
  if (now.replica == replica_json &&
      ServiceOptionsToJson(now.options) == ServiceOptionsToJson(spec.options)) {
    return Status::FailedPrecondition("the file is the same as revision " +
                                      std::to_string(now.number) + " of " + spec.name +
                                      "; nothing to roll out");
  }
  for (auto& r : s->revisions) {
    if (r.state == "rolling out") r.state = "superseded";
  }
  const int number = s->revisions.back().number + 1;
  s->revisions.push_back({number, spec.options, replica_json, wall, "rolling out", ""});
  s->target = number;
  const AutoscaleSpec& a = spec.options.autoscale;
  s->desired = a.on ? std::clamp(s->desired, a.min, a.max) : spec.options.replicas;
  plan_.changed.insert(s->name);
  return number;
}

Status ServiceBook::Scale(const std::string& name, int replicas) {
  Service* s = Mutable(name);
  if (!s) return NoSuchService(name);
  if (const AutoscaleSpec& a = s->Target().options.autoscale; a.on) {
    return Status::FailedPrecondition("service " + name + " autoscales between " +
                                      std::to_string(a.min) + " and " + std::to_string(a.max) +
                                      " replicas; change them with `hangar service update`");
  }
  if (replicas < 0 || replicas > kMaxReplicas) {
    return Status::InvalidArgument("replicas must be 0-" + std::to_string(kMaxReplicas) + ", not " +
                                   std::to_string(replicas));
  }
  s->desired = replicas;
  plan_.changed.insert(name);
  return Status::Ok();
}

StatusOr<int> ServiceBook::Rollback(const std::string& name, int revision, Time wall) {
  Service* s = Mutable(name);
  if (!s) return NoSuchService(name);
  int to = revision ? revision : s->last_good;
  if (!revision && to == s->target) {  // nothing failed: back to the good one before it
    to = 0;
    for (const auto& r : s->revisions) {
      if (r.good && r.number < s->target) to = r.number;
    }
  }
  const Revision* good = s->Find(to);
  if (!good) {
    return Status::FailedPrecondition(
        revision ? "service " + name + " has no revision " + std::to_string(revision) +
                       "; `hangar service get " + name + "` lists them"
                 : "service " + name +
                       " has no revision that was completely rolled "
                       "out; update it with a file that works");
  }
  if (to == s->target) {
    return Status::FailedPrecondition("service " + name + " already runs revision " +
                                      std::to_string(to));
  }
  for (auto& r : s->revisions) {
    if (r.number == s->target && r.state == "rolling out") r.state = "superseded";
  }
  // A rollback is a new revision with the old one's spec, so the history reads in order.
  const int number = s->revisions.back().number + 1;
  Revision back = *good;
  back.number = number;
  back.created = wall;
  back.state = "rolling out";
  back.good = false;
  back.note = "rollback to revision " + std::to_string(to);
  s->revisions.push_back(std::move(back));
  s->target = number;
  s->desired = s->revisions.back().options.replicas > 0 ? s->desired : 0;
  plan_.changed.insert(name);
  return number;
}

Status ServiceBook::Delete(const std::string& name) {
  Service* s = Mutable(name);
  if (!s) return NoSuchService(name);
  s->deleting = true;
  plan_.changed.insert(name);
  return Status::Ok();
}

Status ServiceBook::Move(Service& s, Replica& r, ReplicaState to, Time now, std::string why) {
  TransitionEffects fx;
  HANGAR_RETURN_IF_ERROR(Transition(s.name, s.slot, &r, to, now, std::move(why), &fx));
  for (auto& c : fx.lb) plan_.lb.push_back(std::move(c));
  for (auto& j : fx.stops) plan_.stops.push_back(std::move(j));
  plan_.changed.insert(s.name);
  return Status::Ok();
}

void ServiceBook::Crashed(Service& s, Replica& r, const std::string& how, Time now) {
  const RestartSpec& restart = s.OptionsOf(r).restart;
  Duration wait = restart.backoff;
  for (int i = 0; i < r.crashes && wait < restart.max_backoff; ++i) wait *= 2;
  wait = std::min(wait, restart.max_backoff);
  ++r.crashes;
  ++r.restarts;
  r.job = 0;
  r.relaunch = false;
  r.restart_at = now + wait;
  (void)Move(s, r, ReplicaState::kBackoff, now, how + "; restarts in " + FormatDuration(wait));
}

void ServiceBook::SeeJob(const std::string& service, int replica, const JobSeen& seen, Time now) {
  auto it = services_.find(service);
  if (it == services_.end()) return;
  Service& s = it->second;
  for (Replica& r : s.replicas) {
    if (r.id != replica || !r.job) continue;
    const auto state = job::ParseJobState(seen.state);
    const bool ended = !state || job::IsFinal(*state);
    if (!seen.task_id.empty()) {
      r.node = seen.node;
      r.task_id = seen.task_id;
    }
    if (ended) {
      if (r.removing || (r.state == ReplicaState::kStopping && !r.relaunch)) {
        if (r.state != ReplicaState::kStopping)
          (void)Move(s, r, ReplicaState::kStopping, now, "its job ended");
        (void)Move(s, r, ReplicaState::kGone, now, "its job ended");
        return;
      }
      Crashed(s, r,
              r.relaunch
                  ? "stopped after its liveness probe failed"
                  : "its job ended (" + (seen.state.empty() ? std::string("gone") : seen.state) +
                        (seen.message.empty() ? "" : ": " + Clip(seen.message)) + ")",
              now);
      return;
    }
    if (*state == job::JobState::kRunning) {
      if (r.state == ReplicaState::kPending) {
        r.address = seen.address;
        r.started = now;
        r.next_probe = now;
        const auto& live = s.OptionsOf(r).liveness;
        r.live_from = now + (live ? live->initial_delay : 0);
        r.next_live_probe = r.live_from;
        (void)Move(s, r, ReplicaState::kStarting, now, "its process runs");
      }
      return;
    }
    if (*state == job::JobState::kPreempting && r.state == ReplicaState::kReady) {
      // Preempted: out of rotation for new requests at once; its grace lets those in flight end,
      // and the scheduler stops it (FinishDrains leaves it alone: it is not being removed).
      (void)Move(s, r, ReplicaState::kDraining, now, "preempted: draining");
      return;
    }
    const bool waiting = *state == job::JobState::kPending || *state == job::JobState::kStarting;
    if (waiting && !r.removing && !r.relaunch &&
        (r.state == ReplicaState::kStarting || r.state == ReplicaState::kReady ||
         r.state == ReplicaState::kDraining)) {
      (void)Move(s, r, ReplicaState::kPending, now, "its job was requeued");
    }
    return;
  }
}

void ServiceBook::SeeProbe(const ProbeTarget& t, bool passed, const std::string& detail, Time now) {
  auto it = services_.find(t.service);
  if (it == services_.end()) return;
  Service& s = it->second;
  for (Replica& r : s.replicas) {
    // A result about a process the replica no longer runs says nothing about it.
    if (r.id != t.replica || r.job != t.job || r.removing || r.relaunch) continue;
    if (t.liveness) {
      SeeLiveness(s, r, passed, detail, now);
    } else {
      SeeReadiness(s, r, passed, detail, now);
    }
    return;
  }
}

void ServiceBook::SeeReadiness(Service& s, Replica& r, bool passed, const std::string& detail,
                               Time now) {
  const ProbeSpec& p = s.OptionsOf(r).readiness;
  if (r.state == ReplicaState::kStarting) {
    r.passes = passed ? r.passes + 1 : 0;
    if (!passed) r.why = "not ready: " + detail;
    if (r.passes >= p.success_threshold) {
      r.live_from = std::min(r.live_from, now);
      r.next_live_probe = std::min(r.next_live_probe, now);
      (void)Move(s, r, ReplicaState::kReady, now, "readiness passed");
    }
  } else if (r.state == ReplicaState::kReady) {
    r.failures = passed ? 0 : r.failures + 1;
    if (r.failures >= p.failure_threshold) {
      (void)Move(s, r, ReplicaState::kStarting, now,
                 "readiness failed " + std::to_string(r.failures) + " times: " + detail);
    }
  }
}

// A replica failing liveness leaves rotation as a removed one would (drained within drain_grace,
// then stopped), but comes back: once its job has ended it waits its back-off and runs again.
void ServiceBook::SeeLiveness(Service& s, Replica& r, bool passed, const std::string& detail,
                              Time now) {
  const auto& p = s.OptionsOf(r).liveness;
  if (!p || (r.state != ReplicaState::kStarting && r.state != ReplicaState::kReady)) return;
  r.live_failures = passed ? 0 : r.live_failures + 1;
  if (r.live_failures < p->failure_threshold) return;
  const std::string why =
      "liveness failed " + std::to_string(r.live_failures) + " times in a row (" + detail + ")";
  r.relaunch = true;
  plan_.events.emplace_back(s.name, "replica " + std::to_string(r.id) + " (job " +
                                        std::to_string(r.job) + "): " + why +
                                        "; draining, stopping and restarting it");
  (void)Move(s, r,
             r.state == ReplicaState::kReady ? ReplicaState::kDraining : ReplicaState::kStopping,
             now, why);
}

void ServiceBook::Started(const std::string& service, int replica, uint64_t job) {
  auto it = services_.find(service);
  if (it == services_.end()) return;
  for (Replica& r : it->second.replicas) {
    if (r.id == replica) r.job = job;
  }
  plan_.changed.insert(service);
}

std::vector<ProbeTarget> ServiceBook::DueProbes(Time now) {
  std::vector<ProbeTarget> out;
  for (auto& entry : services_) {
    // Not a structured binding: clang 14 (the fuzz and sanitizer builds) lets no lambda name one.
    const std::string& name = entry.first;
    auto& s = entry.second;
    for (Replica& r : s.replicas) {
      if (r.state != ReplicaState::kStarting && r.state != ReplicaState::kReady) continue;
      if (r.removing || r.relaunch) continue;
      const ServiceOptions& o = s.OptionsOf(r);
      auto due = [&](const ProbeSpec& p, bool liveness, Time* next) {
        // A command probe waits until the replica's task has been seen where it runs.
        if (*next > now || (p.kind == ProbeSpec::Kind::kCommand && r.task_id.empty())) return;
        *next = now + p.interval;
        out.push_back({name, r.id, liveness, r.job, r.address, p.port ? p.port : r.port, r.node,
                       r.task_id, p});
      };
      due(o.readiness, false, &r.next_probe);
      if (o.liveness && now >= r.live_from) due(*o.liveness, true, &r.next_live_probe);
    }
  }
  return out;
}

std::vector<LbChange> ServiceBook::LbState() const {
  std::map<std::pair<int, int>, LbChange> want;
  for (int slot = 0; slot < options_.slots; ++slot) {
    for (int server = 1; server <= kServersPerSlot; ++server) {
      want[{slot, server}] = {slot, server, LbChange::Op::kDisable, "", 0};
    }
  }
  for (const auto& [name, s] : services_) {
    for (const Replica& r : s.replicas) {
      if (r.state == ReplicaState::kReady)
        want[{s.slot, r.server}] = {s.slot, r.server, LbChange::Op::kEnable, r.address, r.port};
      if (r.state == ReplicaState::kDraining)
        want[{s.slot, r.server}] = {s.slot, r.server, LbChange::Op::kDrain, "", 0};
    }
  }
  std::vector<LbChange> out;
  for (auto& [key, c] : want) out.push_back(std::move(c));
  return out;
}

std::vector<std::tuple<std::string, int, uint64_t>> ServiceBook::Jobs() const {
  std::vector<std::tuple<std::string, int, uint64_t>> out;
  for (const auto& [name, s] : services_) {
    for (const Replica& r : s.replicas) {
      if (r.job) out.emplace_back(name, r.id, r.job);
    }
  }
  return out;
}

int ServiceBook::PickPort() const {
  std::set<int> used;
  for (const auto& [name, s] : services_) {
    for (const Replica& r : s.replicas) used.insert(r.port);
  }
  for (int p = options_.first_port; p <= options_.last_port; ++p) {
    if (used.count(p)) continue;
    if (options_.port_usable && !options_.port_usable(p)) continue;
    return p;
  }
  return 0;
}

int ServiceBook::PickServer(const Service& s) const {
  std::set<int> used;
  for (const Replica& r : s.replicas) used.insert(r.server);
  for (int server = 1; server <= kServersPerSlot; ++server) {
    if (!used.count(server)) return server;
  }
  return 0;
}

}  // namespace hangar::controller::service
