// ServiceBook: every service, its revisions and its replicas, and the decisions that keep them
// running: restarts with back-off, readiness, rolling updates within max_surge/max_unavailable,
// rollback, scaling, deletion. No threads, sockets or clocks: the daemon (ServiceController) feeds
// it what it observed -- the replicas' jobs, probe results, the load balancer's sessions -- with
// the time, and carries out what it asks (Plan). The same inputs give the same plan.
//
// A service's endpoint is one of the load balancer's `slots` (a frontend and its backend); each
// replica holds one of the backend's servers while it lives.
#pragma once

#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "controller/service/replica.h"
#include "controller/service/service_spec.h"

namespace hangar::controller::service {

// Servers in each service's backend: the most replicas plus the most surge.
inline constexpr int kServersPerSlot = kMaxReplicas + kMaxSurge;
// How long after a deleted service gave its slot back the load balancer's figures for that slot
// are still its: HAProxy's rate counts the last second, and a round reads it up to a tick later.
inline constexpr Duration kReadingsSettle = 2 * kSecond;

struct Revision {
  int number = 0;
  ServiceOptions options;
  nlohmann::json replica;  // the replica's job spec (job::JobSpecToJson), user and account set
  Time created = 0;        // wall time, for display
  std::string state;       // "rolling out", "complete", "failed", "superseded"
  std::string note;        // why it failed; which revision a rollback restored
  bool good = false;       // it was completely rolled out once
};

struct Service {
  std::string name;
  std::string user;  // who created it
  int slot = 0;
  int desired = 0;
  int target = 0;     // the revision being rolled out or kept
  int last_good = 0;  // the newest revision that was completely rolled out (0: none yet)
  bool deleting = false;
  int next_replica = 1;
  std::vector<Revision> revisions;
  std::vector<Replica> replicas;
  // Autoscaling: the recommendations of the stabilisation window (not stored: a restarted
  // controller begins a new window at the stored count), and why the count is what it is.
  std::vector<std::pair<Time, int>> recommendations;
  std::string scale_note;

  const Revision& Target() const;
  Revision& Target() { return const_cast<Revision&>(static_cast<const Service*>(this)->Target()); }
  const Revision* Find(int revision) const;
  // Whether replica `r` runs what revision `want` asks for: its own revision, or one with the
  // same replica spec (a rollback, or an update of the service block only, adopts such replicas
  // instead of replacing them).
  bool Runs(const Replica& r, int want) const;
  // The options that govern `r`: the target's when it runs the target's spec, else its revision's.
  const ServiceOptions& OptionsOf(const Replica& r) const;
};

// The tier replica `r` runs in, as the API shows it: its revision's template's (guaranteed unless
// the service file says otherwise), or opportunistic for a replica above an autoscaled min.
std::string ReplicaTier(const Service& s, const Replica& r);

// What a round asks of the daemon.
struct ReplicaStart {
  std::string service;
  int replica = 0;
  int revision = 0;
  int port = 0;
  bool opportunistic = false;  // run in the opportunistic tier (above an autoscaled min)
};
struct Plan {
  std::vector<ReplicaStart> starts;
  std::vector<JobStop> stops;
  std::vector<LbChange> lb;
  std::set<std::string> changed;  // services whose record must be stored again
  std::set<std::string> erased;   // services deleted: their records go
  // What happened that people should hear of (the cluster's events): (service, sentence).
  std::vector<std::pair<std::string, std::string>> events;
};

// What the daemon saw of a replica's job.
struct JobSeen {
  std::string state;    // a job state (job_state.h); "" when the job no longer exists
  std::string address;  // the node's address, once placed
  std::string node;     // the node's name and the task's id, once placed
  std::string task_id;
  std::string message;  // the job's own words on how it ended (a task that could not start, ...)
};

struct ProbeTarget {
  std::string service;
  int replica = 0;
  bool liveness = false;  // else readiness
  uint64_t job = 0;       // the replica's job when the probe was due (a later one ignores it)
  std::string address;
  int port = 0;
  std::string node, task_id;  // a command probe runs in this task
  ProbeSpec probe;
};

struct BookOptions {
  int slots = 8;           // services the load balancer can hold
  int first_port = 24000;  // HANGAR_PORT comes from [first_port, last_port]
  int last_port = 28999;
  std::function<bool(int)> port_usable;  // optional: also skip ports this says are taken
};

class ServiceBook {
 public:
  explicit ServiceBook(BookOptions options);

  // The API's changes. Each returns a sentence naming what to do when it cannot be done.
  Status Create(const ServiceSpec& spec, const nlohmann::json& replica_json,
                const std::string& user, Time wall);
  StatusOr<int> Update(const ServiceSpec& spec, const nlohmann::json& replica_json,
                       Time wall);  // the new revision
  Status Scale(const std::string& name, int replicas);
  StatusOr<int> Rollback(const std::string& name, int revision, Time wall);  // 0: the last good one
  Status Delete(const std::string& name);

  // Observations, then one round.
  void SeeJob(const std::string& service, int replica, const JobSeen& seen, Time now);
  // A probe's result (an unknown one is not given: it counts neither way).
  void SeeProbe(const ProbeTarget& probe, bool passed, const std::string& detail, Time now);
  // Sessions in flight per (slot, server), from the load balancer; absent: unknown.
  void SeeSessions(std::map<std::pair<int, int>, int> sessions) { sessions_ = std::move(sessions); }
  // Requests in flight per slot (queued or at a replica), from the load balancer, for autoscaling.
  void SeeInFlight(std::map<int, long> in_flight) { in_flight_ = std::move(in_flight); }
  // Requests per second per slot (over the last second), from the load balancer, for autoscaling.
  void SeeRequestRate(std::map<int, long> rps) { rps_ = std::move(rps); }
  Plan Round(Time now);
  // The daemon started replica `replica`'s job `job` (within the same commit as the plan).
  void Started(const std::string& service, int replica, uint64_t job);
  // Probes due now, readiness and liveness; marks them taken until their interval has passed.
  std::vector<ProbeTarget> DueProbes(Time now);
  // Every server of every slot as it should be (after the load balancer restarted, or this
  // controller took over).
  std::vector<LbChange> LbState() const;

  const std::map<std::string, Service>& services() const { return services_; }
  const Service* Find(const std::string& name) const;
  // Jobs of live replicas, to observe.
  std::vector<std::tuple<std::string, int, uint64_t>> Jobs() const;

  // The stored record of a service, and back (timers restart from `now`).
  nlohmann::json Record(const std::string& name) const;
  Status Restore(const nlohmann::json& record, Time now);
  // What the API shows of a service; `endpoint` is its host:port at the load balancer.
  static nlohmann::json View(const Service& s, const std::string& endpoint, Time now);

 private:
  Service* Mutable(const std::string& name);
  Status Move(Service& s, Replica& r, ReplicaState to, Time now, std::string why);
  void Reconcile(Service& s, Time now);
  void Autoscale(Service& s, Time now);
  void Restart(Service& s, Replica& r, Time now);
  void SeeReadiness(Service& s, Replica& r, bool passed, const std::string& detail, Time now);
  void SeeLiveness(Service& s, Replica& r, bool passed, const std::string& detail, Time now);
  void Crashed(Service& s, Replica& r, const std::string& how, Time now);
  void CheckProgress(Service& s, Time now);
  void Roll(Service& s, Time now);
  void Remove(Service& s, Replica& r, Time now, const std::string& why);
  // The revision new replicas run: the target, or the last good one while a rollout is stopped.
  static int Want(const Service& s);
  static bool Stopped(const Service& s);
  void FinishDrains(Service& s, Time now);
  int AddReplica(Service& s, int revision, Time now);
  int PickPort() const;
  int PickServer(const Service& s) const;
  std::optional<int> PickSlot() const;

  BookOptions options_;
  std::map<std::string, Service> services_;
  std::map<std::pair<int, int>, int> sessions_;
  std::map<int, long> in_flight_;
  std::map<int, long> rps_;
  // When each slot was last given back by a deleted service (the book's clock): the load
  // balancer's figures for a slot are that service's until they have been read afresh, so a new
  // service there does not scale by its predecessor's traffic (kReadingsSettle).
  std::map<int, Time> released_;
  Plan plan_;  // what this round has asked so far
};

}  // namespace hangar::controller::service
