// What each node's agent discovered of its place on the hardware (Register's
// discovered_topology: NVLink peers and fabric, NIC affinity, InfiniBand ports and their
// switches), kept per node while the controller runs (agents tell it again when they register),
// and the tree and disagreements with cluster.yaml built from it (cluster/topology_discovered.h).
// Owned by ClusterState; the state thread only.
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cluster/topology.h"
#include "cluster/topology_discovered.h"
#include "proto/agent.pb.h"

namespace hangar::controller {

class DiscoveredFabric {
 public:
  // `declared` must outlive this.
  explicit DiscoveredFabric(const cluster::Topology& declared) : declared_(declared) {}

  // Keeps what node n's agent reported (replacing its earlier report). Cheap: the verdicts are
  // recomputed by TakeChanges, and only when some node's place changed.
  void Observe(uint32_t n, const ::hangar::agent::v1::DiscoveredTopology& report);
  // The disagreements with cluster.yaml that are new or changed since the last call, for an event
  // each: one node's report can change the verdict on others (a leaf's switch is the one most of
  // its nodes report). One Diff when a place changed since the last call, else nothing: the
  // state calls it once a second, so that a thousand agents registering at once cost a thousand
  // Diffs' worth of work no more than once a second, not one Diff each.
  std::vector<cluster::Disagreement> TakeChanges();

  // The place node n's report gives (its first InfiniBand port with a known switch; its GPUs'
  // NVLink fabric), or an empty place when it has told nothing.
  cluster::DiscoveredPlace Place(uint32_t n) const;
  cluster::DiscoveredTree Tree() const;
  std::vector<cluster::Disagreement> Diff() const;
  size_t reported() const { return reports_.size(); }
  // The disagreement with cluster.yaml last found for node `name` (as of the last TakeChanges),
  // or null when its place agrees or is unknown: the node's condition in `hangar nodes` and on
  // the dashboard.
  const std::string* DisagreementOf(const std::string& name) const {
    auto it = told_.find(name);
    return it == told_.end() ? nullptr : &it->second;
  }

  // GET /v1/topology/discovered: {"nodes": {NAME: report}, "tree": {...}, "disagreements": [...]}.
  nlohmann::json Json() const;

 private:
  std::vector<cluster::DiscoveredPlace> Places() const;

  const cluster::Topology& declared_;
  std::map<uint32_t, ::hangar::agent::v1::DiscoveredTopology> reports_;
  std::map<std::string, std::string> told_;  // node -> the disagreement last returned
  bool dirty_ = false;                       // a node's place changed since TakeChanges ran
};

}  // namespace hangar::controller
