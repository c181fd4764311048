// An imported fabric as cluster.yaml, and where it disagrees with a cluster.yaml.
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <set>

#include "cluster/hostlist.h"
#include "cluster/topology_import.h"

namespace hangar::cluster {

namespace {

// Every node entry of a cluster file (flat `nodes`, or under `fabric`), by expanded host name:
// its fields other than `name`, as a flow map's inside ("rack: rack-a, gpus: 4"; "" when none).
StatusOr<std::map<std::string, std::string>> DeclaredFields(const YAML::Node& root) {
  std::vector<YAML::Node> lists;
  if (root["nodes"]) lists.push_back(root["nodes"]);
  if (root["fabric"] && root["fabric"]["spines"]) {
    for (const auto& s : root["fabric"]["spines"]) {
      for (const auto& l : s["leaves"]) {
        if (l["nodes"]) lists.push_back(l["nodes"]);
      }
    }
  }
  std::map<std::string, std::string> out;
  for (const auto& list : lists) {
    for (const auto& entry : list) {
      if (!entry.IsMap() || !entry["name"]) continue;
      YAML::Node fields(YAML::NodeType::Map);
      for (const auto& kv : entry) {
        if (kv.first.as<std::string>() != "name") fields[kv.first] = kv.second;
      }
      YAML::Emitter e;
      e << YAML::Flow << fields;
      std::string text = e.c_str();
      if (text.size() >= 2 && text.front() == '{') text = text.substr(1, text.size() - 2);
      if (text.find('[') != std::string::npos &&
          (entry["management_address"] || entry["data_address"])) {
        return Status::InvalidArgument(
            "node '" + entry["name"].as<std::string>() +
            "' gives its addresses as a range; write them per node before importing");
      }
      auto names = ExpandHostList(entry["name"].as<std::string>());
      if (!names.ok()) return names.status();
      for (const auto& n : *names) out[n] = text;
    }
  }
  return out;
}

std::string Quoted(const std::string& s) { return "\"" + s + "\""; }

// The node entries of one leaf: runs of hosts with the same fields, each compressed into one name.
std::string NodeEntries(const std::vector<std::string>& hosts,
                        const std::map<std::string, std::string>& fields) {
  std::string out;
  for (size_t i = 0; i < hosts.size();) {
    auto f = fields.find(hosts[i]);
    const std::string mine = f == fields.end() ? "" : f->second;
    size_t j = i + 1;
    while (j < hosts.size()) {
      auto g = fields.find(hosts[j]);
      if ((g == fields.end() ? "" : g->second) != mine) break;
      ++j;
    }
    std::vector<std::string> run(hosts.begin() + static_cast<long>(i),
                                 hosts.begin() + static_cast<long>(j));
    out += std::string(out.empty() ? "" : ", ") + "{name: " + Quoted(CompressHostList(run)) +
           (mine.empty() ? "" : ", " + mine) + "}";
    i = j;
  }
  return "[" + out + "]";
}

// `fields` (a node entry's fields, as DeclaredFields writes them) with `rack` and `nvlink: rack`
// set for a host of a multi-node NVLink domain.
std::string WithNvlinkRack(const std::string& fields, const std::string& rack) {
  YAML::Node node =
      fields.empty() ? YAML::Node(YAML::NodeType::Map) : YAML::Load("{" + fields + "}");
  node["rack"] = rack;
  node["nvlink"] = "rack";
  YAML::Emitter e;
  e << YAML::Flow << node;
  std::string text = e.c_str();
  return text.size() >= 2 && text.front() == '{' ? text.substr(1, text.size() - 2) : text;
}

}  // namespace

StatusOr<std::string> FabricYaml(const ImportedFabric& f, std::string_view cluster_yaml,
                                 std::vector<std::string>* missing) {
  std::string out;
  std::map<std::string, std::string> fields;
  if (!cluster_yaml.empty()) {
    YAML::Node root;
    try {
      root = YAML::Load(std::string(cluster_yaml));
    } catch (const YAML::Exception& e) {
      return Status::InvalidArgument(std::string("the cluster file is not YAML: ") + e.what());
    }
    if (!root.IsMap()) return Status::InvalidArgument("the cluster file is not a map of settings");
    HANGAR_ASSIGN_OR_RETURN(fields, DeclaredFields(root));
    for (const auto& kv : root) {
      const std::string key = kv.first.as<std::string>();
      if (key == "nodes" || key == "fabric" || key == "fat_tree") continue;
      YAML::Emitter e;
      e << YAML::BeginMap << YAML::Key << key << YAML::Value << kv.second << YAML::EndMap;
      out += std::string(e.c_str()) + "\n";
    }
  }
  std::map<std::string, std::string> declared = fields;  // for `missing`: as the file has them
  for (const auto& [host, rack] : f.nvlink_racks) fields[host] = WithNvlinkRack(fields[host], rack);
  out += "fabric:\n  spines:\n";
  for (const auto& s : f.spines) {
    out += "    - name: " + Quoted(s.name) + "\n      leaves:\n";
    for (const auto& l : s.leaves) {
      out += "        - name: " + Quoted(l.name) +
             "\n          nodes: " + NodeEntries(l.hosts, fields) + "\n";
      if (missing && !cluster_yaml.empty()) {
        for (const auto& h : l.hosts) {
          if (!declared.count(h)) missing->push_back(h);
        }
      }
    }
  }
  return out;
}

std::vector<std::string> DiffFabric(const Topology& declared, const ImportedFabric& found) {
  const auto where = found.Placement();
  // Each declared leaf (and spine block) is the found one that holds most of its nodes.
  std::map<std::string, std::map<std::string, int>> leaf_votes, spine_votes;
  for (const auto& n : declared.nodes()) {
    auto it = where.find(n.name);
    if (it == where.end()) continue;
    leaf_votes[declared.leaves()[n.leaf].name][it->second.first]++;
    spine_votes[declared.spines()[n.spine].name][it->second.second]++;
  }
  auto winner = [](const std::map<std::string, int>& votes) {
    return std::max_element(votes.begin(), votes.end(),
                            [](const auto& a, const auto& b) { return a.second < b.second; })
        ->first;
  };
  std::map<std::string, std::string> leaf_is, spine_is;
  for (const auto& [d, v] : leaf_votes) leaf_is[d] = winner(v);
  for (const auto& [d, v] : spine_votes) spine_is[d] = winner(v);
  std::vector<std::string> out;
  std::set<std::string> reported_leaves;
  for (const auto& n : declared.nodes()) {
    const std::string& dleaf = declared.leaves()[n.leaf].name;
    const std::string& dspine = declared.spines()[n.spine].name;
    auto it = where.find(n.name);
    if (it == where.end()) {
      out.push_back("node " + n.name + " is in cluster.yaml (leaf " + dleaf +
                    ") but no switch of the fabric has it");
      continue;
    }
    const auto& [fleaf, fspine] = it->second;
    if (fleaf != leaf_is[dleaf]) {
      out.push_back("node " + n.name + " is on the wrong leaf: cluster.yaml declares it under " +
                    dleaf + " (the fabric's " + leaf_is[dleaf] + "), but it is cabled to " + fleaf +
                    "; move it in cluster.yaml or fix its cabling");
    } else if (fspine != spine_is[dspine] && reported_leaves.insert(dleaf).second) {
      out.push_back("leaf " + dleaf +
                    " is under another spine block: cluster.yaml declares it under " + dspine +
                    " (the fabric's " + spine_is[dspine] + "), but the fabric has it under " +
                    fspine);
    }
  }
  for (const auto& [host, place] : where) {
    if (!declared.FindNode(host)) {
      out.push_back("host " + host + " is in the fabric (leaf " + place.first +
                    ") but not in cluster.yaml");
    }
  }
  return out;
}

}  // namespace hangar::cluster
