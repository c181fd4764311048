#include "job/node_list_spec.h"

#include <algorithm>

#include "cluster/hostlist.h"

namespace hangar::job {

namespace {

Status AddHostList(const std::string& text, const std::string& field,
                   std::vector<std::string>* out) {
  auto names = cluster::ExpandHostList(text);
  if (!names.ok()) return Status::InvalidArgument(field + ": " + names.status().message());
  for (auto& n : *names) {
    if (n.empty() || n.size() > 253 || n.find_first_of(" \t\r\n[]") != std::string::npos) {
      return Status::InvalidArgument(
          field + ": '" + n +
          "' is not a node name; write names or host lists such as gpu-[01-04,07]");
    }
    out->push_back(std::move(n));
    if (out->size() > NodeListSpec::kMaxNodes) {
      return Status::InvalidArgument(
          field + " names more than " + std::to_string(NodeListSpec::kMaxNodes) +
          " nodes; name fewer, or use node_selector labels for a large pool");
    }
  }
  return Status::Ok();
}

}  // namespace

StatusOr<std::vector<std::string>> ParseNodeNames(const nlohmann::json& value,
                                                  const std::string& field) {
  std::vector<std::string> names;
  const std::string form = "; write a host list such as \"gpu-[01-04,07]\" or a list of names";
  if (value.is_string()) {
    HANGAR_RETURN_IF_ERROR(AddHostList(value.get<std::string>(), field, &names));
  } else if (value.is_array()) {
    for (const auto& item : value) {
      if (!item.is_string())
        return Status::InvalidArgument(field + " holds " + item.dump() + ", not a node name" +
                                       form);
      HANGAR_RETURN_IF_ERROR(AddHostList(item.get<std::string>(), field, &names));
    }
  } else {
    return Status::InvalidArgument(field + " must name nodes" + form);
  }
  if (names.empty())
    return Status::InvalidArgument(field + " names no node" + form + ", or leave it out");
  std::sort(names.begin(), names.end());
  names.erase(std::unique(names.begin(), names.end()), names.end());
  return names;
}

Status CheckNodeLists(const NodeListSpec& nodes) {
  std::vector<std::string> both;
  std::set_intersection(nodes.include.begin(), nodes.include.end(), nodes.exclude.begin(),
                        nodes.exclude.end(), std::back_inserter(both));
  if (both.empty()) return Status::Ok();
  return Status::InvalidArgument(
      "include_nodes and exclude_nodes both name " + cluster::CompressHostList(both) +
      "; a node the job must use cannot also be excluded: remove it from one of them");
}

std::string NodeNamesText(const std::vector<std::string>& names) {
  return cluster::CompressHostList(names);
}

}  // namespace hangar::job
