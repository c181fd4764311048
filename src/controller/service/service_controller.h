// ServiceController: the daemon around ServiceBook. One thread, every 100 ms: observe the
// replicas' jobs (through the state owner), run the readiness probes that are due, read the load
// balancer's sessions, then let the book decide a round and carry it out -- replica jobs submitted
// and cancelled and the service records stored in one commit, then the load balancer told over its
// runtime API. The API's changes (create, update, scale, rollback, delete) are stored before they
// are answered.
//
// Its narrow contact with the cluster's state is the StateOwner: Submit, Cancel, GetJob and
// GetNode, and the store's "service" table.
#pragma once

#include <atomic>
#include <condition_variable>
#include <future>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "common/mutex.h"
#include "controller/service/command_probe.h"
#include "controller/service/haproxy_config.h"
#include "controller/service/lb_client.h"
#include "controller/service/readiness_probe.h"
#include "controller/service/service_book.h"
#include "controller/state_owner.h"

namespace hangar::controller::service {

struct ServiceControllerOptions {
  LbLayout lb;
  int first_port = 24000;  // HANGAR_PORT range
  int last_port = 28999;
  Duration tick = 100;
  // Whether replica ports must also be free on this host (the nodes are this host: `hangar dev`).
  bool ports_on_this_host = false;
};

class ServiceController {
 public:
  // `prober` runs command probes (null: they fail, saying so); it outlives this.
  ServiceController(StateOwner* owner, ServiceControllerOptions options,
                    CommandProber* prober = nullptr);
  ~ServiceController();

  // The services stored in the "service" table; before Start.
  Status Restore(const std::vector<KeyValueRow>& values) HANGAR_EXCLUDES(mu_);
  void Start();
  void Stop() HANGAR_EXCLUDES(wake_mu_);

  // The API's side; any thread. Each change is stored before it returns.
  Status Create(const ServiceSpec& spec, const std::string& user) HANGAR_EXCLUDES(mu_);
  StatusOr<int> Update(const ServiceSpec& spec, const std::string& user, bool admin)
      HANGAR_EXCLUDES(mu_);
  Status Scale(const std::string& name, int replicas, const std::string& user, bool admin)
      HANGAR_EXCLUDES(mu_);
  StatusOr<int> Rollback(const std::string& name, int revision, const std::string& user, bool admin)
      HANGAR_EXCLUDES(mu_);
  Status Delete(const std::string& name, const std::string& user, bool admin) HANGAR_EXCLUDES(mu_);
  nlohmann::json List() const HANGAR_EXCLUDES(mu_);
  StatusOr<nlohmann::json> Get(const std::string& name) const HANGAR_EXCLUDES(mu_);
  // Why the service has the replicas it has, and why each wanted one that is not ready waits
  // (service_explain.h).
  StatusOr<nlohmann::json> Explain(const std::string& name) const HANGAR_EXCLUDES(mu_);
  // The service whose replica job `job` is (nullopt: none's).
  std::optional<std::string> OwnerOf(uint64_t job) const HANGAR_EXCLUDES(mu_);
  // The ready replicas' addresses, for those who route traffic themselves.
  StatusOr<nlohmann::json> Endpoints(const std::string& name) const HANGAR_EXCLUDES(mu_);
  // Prometheus series per service (replicas desired and ready; requests, 5xx answers and requests
  // in flight at its endpoint, from HAProxy's counters, which restart with HAProxy).
  std::string RenderMetrics() const HANGAR_EXCLUDES(mu_);

 private:
  void Loop() HANGAR_EXCLUDES(wake_mu_);
  void Tick() HANGAR_EXCLUDES(mu_);
  // Tick's steps: the replicas' jobs into the book; the due probes started, and those that have
  // finished collected (a probe of a hung replica takes its whole timeout: it must not hold up
  // the rounds); HAProxy's `show stat` (nullopt when it does not answer).
  void ObserveJobs() HANGAR_EXCLUDES(mu_);
  std::vector<std::pair<ProbeTarget, ProbeResult>> RunDueProbes() HANGAR_EXCLUDES(mu_);
  ProbeResult RunOne(const ProbeTarget& p) const;
  std::optional<std::string> ReadLoadBalancer();
  // Stores the records of `changed` and erases `erased`, in one commit.
  Status Store(const std::set<std::string>& changed, const std::set<std::string>& erased)
      HANGAR_REQUIRES(mu_);
  // Carries out a round's plan.
  void Execute(const Plan& plan) HANGAR_REQUIRES(mu_);
  void ApplyLb(const std::vector<LbChange>& changes);
  Status MayChange(const std::string& name, const std::string& user, bool admin) const
      HANGAR_REQUIRES(mu_);
  Time Now() const;
  // The slot's traffic as HAProxy last said, into a service's view.
  void AddTraffic(int slot, nlohmann::json* view) const HANGAR_REQUIRES(mu_);

  StateOwner* owner_;
  ServiceControllerOptions options_;
  LbClient lb_;
  CommandProber* prober_;
  // The loop thread's: probes in flight (at most one per replica and kind).
  std::vector<std::pair<ProbeTarget, std::future<ProbeResult>>> probing_;
  mutable Mutex mu_;
  ServiceBook book_ HANGAR_GUARDED_BY(mu_);
  std::map<int, SlotTraffic> traffic_ HANGAR_GUARDED_BY(mu_);  // per slot, as HAProxy last said
  bool lb_in_sync_ =
      false;  // the loop thread's: false until every server was set (and after a failure)
  Time last_resync_ = 0;          // the loop thread's
  bool lb_reachable_ = true;      // the loop thread's: for logging its changes only
  std::vector<LbChange> lb_set_;  // the loop thread's: the servers as the last round left them
  Mutex wake_mu_;
  std::condition_variable wake_;
  bool stopping_ HANGAR_GUARDED_BY(wake_mu_) = false;
  std::thread thread_;
};

// "24000-28999" to its two ends.
StatusOr<std::pair<int, int>> ParsePortRange(const std::string& text);

}  // namespace hangar::controller::service
