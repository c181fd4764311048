#include "cli/sbatch_nodes.h"

#include <algorithm>
#include <set>

#include "cluster/hostlist.h"

namespace hangar::cli::sbatch {

void AddNodeRules(const SbatchOptions& o, int nodes, nlohmann::ordered_json* j, Diagnostics* d) {
  std::set<std::string> listed, excluded;
  if (o.nodelist) {
    auto names = cluster::ExpandHostList(*o.nodelist);  // checked when read
    if (names.ok()) listed.insert(names->begin(), names->end());
    if (static_cast<int>(listed.size()) > nodes) {
      d->errors.push_back(WhereSet(o, "nodelist") + ": --nodelist=" + *o.nodelist + " names " +
                          std::to_string(listed.size()) + " nodes but the job has " +
                          std::to_string(nodes) + " (" + WhereSet(o, "nodes") +
                          "); each listed node holds one of the job's nodes: give --nodes=" +
                          std::to_string(listed.size()));
      return;
    }
    (*j)["include_nodes"] = *o.nodelist;
  }
  if (o.exclude) {
    auto names = cluster::ExpandHostList(*o.exclude);
    if (names.ok()) excluded.insert(names->begin(), names->end());
    std::vector<std::string> both;
    std::set_intersection(listed.begin(), listed.end(), excluded.begin(), excluded.end(),
                          std::back_inserter(both));
    if (!both.empty()) {
      d->errors.push_back(WhereSet(o, "exclude") + ": --exclude=" + *o.exclude + " names " +
                          cluster::CompressHostList(both) + ", which --nodelist (" +
                          WhereSet(o, "nodelist") +
                          ") lists too; a node cannot be both: remove it from one of them");
      return;
    }
    (*j)["exclude_nodes"] = *o.exclude;
  }
}

}  // namespace hangar::cli::sbatch
