// HaCluster: several `hangar controller` processes sharing one PostgreSQL store of their own (a
// test server in a temp dir), and agents given the list of them, all on 127.0.0.1 (issue 18). For
// the failover tests and bench/failover. Tasks it submits write when they start and end (node,
// job, task, GPUs) to a marks file, from which CheckInvariants judges the run. Tears everything
// down, tasks included, when it goes away.
#pragma once

#include <sys/types.h>

#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "common/status.h"
#include "common/time.h"
#include "controller/store/testing/postgres_server.h"
#include "tcp_proxy.h"

namespace hangar::testing {

struct HaOptions {
  int controllers = 3;
  std::vector<std::string> nodes = {"node-1", "node-2", "node-3", "node-4"};  // 8 GPUs each
  std::string lease = "1500ms", renew = "300ms", poll = "100ms";
  // Controller 0 reaches the store through a TcpProxy that CutFirstFromStore() silences.
  bool proxy_first = false;
  // How often standbys follow the store (--standby-follow; "0": cold standbys).
  std::string follow = "250ms";
  // Added to every agent's command line (e.g. --allow-maintenance-commands).
  std::vector<std::string> agent_args;
  // Runs once the store's server is up, before any controller starts (e.g. to fill the store).
  std::function<Status(const std::string& url)> before_controllers;
};

// What the invariant checker found; all zero is a correct run.
struct Invariants {
  int jobs_lost = 0;                  // accepted, but not ended (or not in the store at all)
  int jobs_ended_twice = 0;           // more than one ending event
  int double_allocations = 0;         // one GPU of one node held by two live tasks at one moment
  int tasks_started_twice = 0;        // one (job, task index) started more than once
  std::vector<std::string> problems;  // a sentence each, the first few
  bool ok() const {
    return jobs_lost + jobs_ended_twice + double_allocations + tasks_started_twice == 0;
  }
};

class HaCluster {
 public:
  static StatusOr<std::unique_ptr<HaCluster>> Start(const HaOptions& o);
  ~HaCluster();

  Status StartController(int i);  // (re)starts controller i on its own ports
  void Signal(int i, int sig);    // to a live controller
  // With proxy_first: controller 0's link to the store goes silent (no reset); agents still reach
  // it.
  void CutFirstFromStore();
  // Waits up to `timeout` for controller i to exit; its wait status, or -1 while it runs.
  int WaitExit(int i, Duration timeout);
  bool Alive(int i);
  // The controller that answers GET /v1/leader as the leader; -1 when none does now.
  int Leader();
  int WaitLeader(Duration timeout);
  // Waits until every live standby says its copy of the store is ready (warm_standby.h).
  bool WaitStandbysReady(Duration timeout);
  // Submits a job of `replicas` x `gpus` GPUs that runs `seconds`, through the controller list
  // (an Idempotency-Key, resent until `timeout`). Its id, or 0; `by` gets who accepted it.
  uint64_t Submit(int replicas, int gpus, double seconds, Duration timeout, int* by = nullptr);
  // GET from the leader (the list, followed); null when no answer.
  nlohmann::json Get(const std::string& path);
  // Waits until every job of `ids` has ended (per the store).
  bool WaitEnded(const std::vector<uint64_t>& ids, Duration timeout);
  Invariants Check(const std::vector<uint64_t>& accepted);
  // A line per controller: its exit status and the last lines of its log.
  std::string Describe();

  controller::testing::PostgresServer& postgres() { return *pg_; }
  const std::string& store_url() const { return url_; }
  std::string api(int i) const { return "http://127.0.0.1:" + std::to_string(api_ports_[i]); }
  std::string ApiList() const;
  const std::string& dir() const { return dir_; }
  int agent_port(int i) const { return agent_ports_[i]; }
  pid_t pid(int i) const { return pids_[i]; }
  int controllers() const { return static_cast<int>(pids_.size()); }

 private:
  HaCluster() = default;
  pid_t Spawn(const std::vector<std::string>& args, const std::string& log);
  Status StartAgents();

  HaOptions o_;
  std::unique_ptr<controller::testing::PostgresServer> pg_;
  std::unique_ptr<TcpProxy> proxy_;
  std::string url_, dir_, cluster_path_;
  // Every port a controller listens on is picked here, before any starts: a controller left to
  // choose one (its sessions' port) could take a port picked for the next one's API.
  std::vector<int> api_ports_, agent_ports_, session_ports_;
  std::vector<pid_t> pids_;
  std::vector<int> exit_status_;
  std::vector<pid_t> agents_;
};

}  // namespace hangar::testing
