// NodeRule: a job's include_nodes and exclude_nodes (job/node_list_spec.h, Slurm's --nodelist
// and --exclude) as node indices of one topology. The placer never puts a task of the job on an
// excluded node, and places one replica on each included node before the rest (so the
// allocation includes them all, as Slurm's --nodelist means); explain names the rule when it is
// what keeps the job waiting.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "cluster/topology.h"
#include "common/status.h"
#include "job/node_list_spec.h"

namespace hangar::sched {

struct NodeRule {
  std::vector<uint32_t> excluded;  // sorted node indices
  std::vector<uint32_t> required;  // sorted node indices; each hosts at least one replica
  // include_nodes names a node the cluster does not have (a stored job, after the node left
  // cluster.yaml): the job can never run, and says so.
  bool required_missing = false;

  bool empty() const { return excluded.empty() && required.empty() && !required_missing; }
  bool Excludes(uint32_t node) const;
  bool operator==(const NodeRule&) const = default;
};

// Resolves `nodes` against `topology`. A name the cluster has no node of is dropped from
// `excluded` (no task can go there anyway) and sets `required_missing` for `required`, so that a
// stored job is restored whatever became of its nodes; a new submission is held to
// CheckNodeNames first.
NodeRule CompileNodeRule(const job::NodeListSpec& nodes, const cluster::Topology& topology);
// InvalidArgument, naming the field and the names, when `nodes` names a node the cluster lacks.
Status CheckNodeNames(const job::NodeListSpec& nodes, const cluster::Topology& topology);
// The nodes' names in Slurm's compact form ("gpu-[1-3]").
std::string NodeNames(const cluster::Topology& topology, const std::vector<uint32_t>& nodes);

}  // namespace hangar::sched
