// Node rules in a job file, after Slurm's --nodelist and --exclude:
//
//   include_nodes: "gpu-[01-02]"            # the job's allocation must include each of these
//   exclude_nodes: [gpu-07, "gpu-[10-12]"]  # no task of the job runs on these
//
// Each field is a host list in Slurm's form or a list of them. Names are expanded when the file
// is read; whether they name nodes of the cluster is checked at submission (sched::CompileGang),
// where a name the cluster does not have is refused.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "common/status.h"

namespace hangar::job {

struct NodeListSpec {
  // More names than any cluster Hangar runs has nodes; checked after each host list is
  // expanded (cluster::ExpandHostList bounds the expansion itself).
  static constexpr size_t kMaxNodes = 100'000;
  std::vector<std::string> include;  // sorted, no repeats
  std::vector<std::string> exclude;  // sorted, no repeats
  bool empty() const { return include.empty() && exclude.empty(); }
};

// The names of one field (`field` is its name, for errors): a host list ("gpu-[1-3,5]") or a
// list of them. Errors say what was wrong and show the form.
StatusOr<std::vector<std::string>> ParseNodeNames(const nlohmann::json& value,
                                                  const std::string& field);
// Checks what holds on any cluster: no node both included and excluded.
Status CheckNodeLists(const NodeListSpec& nodes);
// The compact host list of `names` ("gpu-[1-3,5]"), as a job file writes it.
std::string NodeNamesText(const std::vector<std::string>& names);

}  // namespace hangar::job
