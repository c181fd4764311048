// SparePool: the hot spares cluster.yaml keeps (`spares:`, docs/goodput.md), and the replacements
// made from them.
//
// A spare takes only opportunistic work from the scheduler (the owner gives it a window only
// opportunistic jobs may use) until a running gang loses a node: then the gang keeps its healthy
// nodes and takes the spare, or else any free node, from the smallest topology domain around the
// failed node that keeps its rule (sched::PickReplacement, which the simulator uses too). A taken
// spare is a node like any other from then on and its domain is short one, until an idle healthy
// node of that domain (for a named pool: one of its nodes) becomes a spare again (Refill).
//
// Not thread-safe: the state thread owns it.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "cluster/spares_yaml.h"
#include "cluster/topology.h"
#include "cluster/usage.h"
#include "common/time.h"
#include "job/job_spec.h"

namespace hangar::controller {

class SparePool {
 public:
  using JobId = uint64_t;
  // Designates the spares: a pool's named nodes, or the highest-numbered `count` nodes of each
  // domain at `per`. `topo` outlives the pool.
  SparePool(const cluster::Topology& topo, cluster::SparesConfig config);

  bool enabled() const { return config_.enabled(); }
  bool IsSpare(uint32_t n) const { return n < spare_.size() && spare_[n]; }
  size_t count() const { return count_; }
  // Spares missing from the domains' counts (taken and not refilled).
  size_t missing() const { return missing_; }

  struct Pick {
    uint32_t node = 0;
    bool spare = false;
  };
  // The replacement for `failed` under `rule`: a spare for which `spare_fits` holds, from the
  // smallest domain around `failed` that keeps the rule; else, the same way, a node that is not a
  // spare for which `free_fits` holds. nullopt when neither is found.
  std::optional<Pick> PickFor(uint32_t failed, const job::TopologyConstraint& rule,
                              const std::function<bool(uint32_t)>& spare_fits,
                              const std::function<bool(uint32_t)>& free_fits) const;
  // The spare `n` was taken: from now on it is a node like any other, its domain short one.
  void Take(uint32_t n);
  // The nodes that could bring a short domain back to its count, in the order to try them
  // (the highest-numbered first); empty when no domain is short.
  std::vector<uint32_t> RefillCandidates() const;
  // Makes `n` a spare again (the caller checked it is idle and healthy). False when its domain
  // has its count, or `n` is not in a named pool.
  bool Refill(uint32_t n);

  // A replacement made for a job: its node `failed` gave way to `with`.
  struct Replacement {
    uint32_t attempt = 0;  // the attempt that runs on it
    uint32_t failed = 0, with = 0;
    bool spare = false;  // `with` was a spare (else a free node)
    Time at = 0;
    std::string why;  // why `failed` was left
  };
  static constexpr size_t kKeptPerJob = 10;
  void Record(JobId job, Replacement r);
  // Whether `job` waits for its previous attempt to stop before it restarts in place (its
  // healthy nodes and its replacement are held for it meanwhile). Set by Record; cleared by
  // Started or Forget.
  bool Waiting(JobId job) const { return waiting_.count(job) > 0; }
  void Started(JobId job) { waiting_.erase(job); }
  const std::set<JobId>& waiting() const { return waiting_; }

  // A gang that lost node `failed` when no spare or free node could replace it, and whose policy
  // (on_node_failure.wait_for_node) holds its healthy nodes for it meanwhile: the tasks `moved` of
  // `was` wait for a node to take them until `until`; then its healthy nodes go back to the pool.
  struct NodeWait {
    uint32_t failed = 0;
    std::vector<size_t> moved;
    cluster::GangAssignment was;
    Time since = 0, until = 0;
    std::string why;  // why `failed` was left
  };
  void WaitForNode(JobId job, NodeWait w) { node_waits_[job] = std::move(w); }
  const NodeWait* WaitingForNode(JobId job) const {
    auto it = node_waits_.find(job);
    return it == node_waits_.end() ? nullptr : &it->second;
  }
  void StopWaitingForNode(JobId job) { node_waits_.erase(job); }
  const std::map<JobId, NodeWait>& node_waits() const { return node_waits_; }

  // Forgets every job for which `gone` holds (ended and purged).
  void Sweep(const std::function<bool(JobId)>& gone);
  // {"replacements": [{"attempt", "at_ms", "failed", "with", "spare", "why"}], "waiting",
  // "holding": {"failed", "since_ms", "until_ms", "nodes", "why"} while it waits for a node}: the
  // latest kKeptPerJob of `job`, oldest first; null when it had none and waits for none.
  nlohmann::json Json(JobId job) const;
  // {"spares": [names], "missing"}.
  nlohmann::json PoolJson() const;

 private:
  // The domain index of `n` at the config's level (0 for a named pool: the whole cluster).
  uint32_t DomainOf(uint32_t n) const;
  uint32_t Target(uint32_t domain) const;

  const cluster::Topology& topo_;
  cluster::SparesConfig config_;
  std::vector<uint8_t> spare_;  // by node
  std::vector<uint8_t> named_;  // by node: in the named pool
  std::vector<uint32_t> have_;  // spares now, by domain
  size_t count_ = 0, missing_ = 0;
  std::map<JobId, std::vector<Replacement>> replaced_;
  std::set<JobId> waiting_;
  std::map<JobId, NodeWait> node_waits_;
};

}  // namespace hangar::controller
