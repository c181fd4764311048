// The importers: Slurm's topology.conf, ibnetdiscover's dump, a CSV of hosts per switch layer.
#include "cluster/topology_import.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <regex>
#include <set>
#include <sstream>

#include "cluster/hostlist.h"

namespace hangar::cluster {

namespace {

std::string Trim(std::string_view s) {
  size_t b = 0, e = s.size();
  while (b < e && std::isspace(static_cast<unsigned char>(s[b]))) ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(s[e - 1]))) --e;
  return std::string(s.substr(b, e - b));
}

std::vector<std::string> Lines(std::string_view text) {
  std::vector<std::string> out;
  std::string line;
  std::istringstream in{std::string(text)};
  while (std::getline(in, line)) out.push_back(line);
  return out;
}

Status LineError(const std::string& source, size_t line, const std::string& what) {
  return Status::InvalidArgument(source + ":" + std::to_string(line) + ": " + what);
}

// Leaves in first-seen order grouped into spine blocks in first-seen order.
class FabricBuilder {
 public:
  void Add(const std::string& host, const std::string& leaf, const std::string& spine) {
    auto [s, fresh] = spine_of_.try_emplace(spine, fabric_.spines.size());
    if (fresh) fabric_.spines.push_back({spine, {}});
    ImportedFabric::Spine& sp = fabric_.spines[s->second];
    auto l = std::find_if(sp.leaves.begin(), sp.leaves.end(),
                          [&](const auto& x) { return x.name == leaf; });
    if (l == sp.leaves.end()) l = sp.leaves.insert(sp.leaves.end(), {leaf, {}});
    l->hosts.push_back(host);
  }
  void Note(std::string n) { fabric_.notes.push_back(std::move(n)); }
  StatusOr<ImportedFabric> Take(const std::string& source) {
    if (fabric_.spines.empty())
      return Status::InvalidArgument(source + ": no host under any switch was found");
    return std::move(fabric_);
  }

 private:
  ImportedFabric fabric_;
  std::map<std::string, size_t> spine_of_;
};

// "Key=Value Key=Value" (Slurm's configuration lines); keys are case-insensitive.
std::map<std::string, std::string> SlurmFields(const std::string& line) {
  std::map<std::string, std::string> out;
  std::istringstream in(line);
  std::string token;
  while (in >> token) {
    const size_t eq = token.find('=');
    if (eq == std::string::npos) continue;
    std::string key = token.substr(0, eq);
    std::transform(key.begin(), key.end(), key.begin(),
                   [](unsigned char c) { return std::tolower(c); });
    out[key] = token.substr(eq + 1);
  }
  return out;
}

}  // namespace

size_t ImportedFabric::NumHosts() const {
  size_t n = 0;
  for (const auto& s : spines) {
    for (const auto& l : s.leaves) n += l.hosts.size();
  }
  return n;
}

std::map<std::string, std::pair<std::string, std::string>> ImportedFabric::Placement() const {
  std::map<std::string, std::pair<std::string, std::string>> out;
  for (const auto& s : spines) {
    for (const auto& l : s.leaves) {
      for (const auto& h : l.hosts) out.emplace(h, std::make_pair(l.name, s.name));
    }
  }
  return out;
}

// topology.conf (topology/tree): `SwitchName=leaf01 Nodes=gpu[001-036]` for a leaf, and
// `SwitchName=spine01 Switches=leaf[01-04]` above it. A leaf's spine block is the switch that
// lists it; a leaf no switch lists is a block of its own.
StatusOr<ImportedFabric> ImportSlurmTopology(std::string_view text, const std::string& source) {
  struct Switch {
    std::vector<std::string> nodes, switches;
    size_t line = 0;
  };
  std::vector<std::string> order;
  std::map<std::string, Switch> switches;
  const std::vector<std::string> lines = Lines(text);
  for (size_t i = 0; i < lines.size(); ++i) {
    std::string line = lines[i];
    if (auto hash = line.find('#'); hash != std::string::npos) line.resize(hash);
    if (Trim(line).empty()) continue;
    auto f = SlurmFields(line);
    if (!f.count("switchname")) {
      return LineError(source, i + 1,
                       "expected SwitchName=NAME with Nodes= or Switches= (topology/tree); a "
                       "topology/block file (BlockName=) is not read");
    }
    const std::string name = f["switchname"];
    if (switches.count(name))
      return LineError(source, i + 1, "switch '" + name + "' is declared twice");
    Switch sw;
    sw.line = i + 1;
    for (const char* key : {"nodes", "switches"}) {
      if (!f.count(key)) continue;
      auto list = ExpandHostList(f[key]);
      if (!list.ok())
        return LineError(source, i + 1, std::string(key) + ": " + list.status().message());
      (std::string(key) == "nodes" ? sw.nodes : sw.switches) = std::move(*list);
    }
    order.push_back(name);
    switches.emplace(name, std::move(sw));
  }
  std::map<std::string, std::string> parent;
  FabricBuilder b;
  for (const auto& name : order) {
    for (const auto& child : switches[name].switches) {
      if (!switches.count(child)) {
        return LineError(
            source, switches[name].line,
            "switch '" + name + "' lists '" + child + "', which no SwitchName= line declares");
      }
      if (auto [it, fresh] = parent.emplace(child, name); !fresh) {
        b.Note("switch " + child + " is under both " + it->second + " and " + name +
               ": its spine block is " + it->second);
      }
    }
  }
  std::set<std::string> seen;
  for (const auto& name : order) {
    const Switch& sw = switches[name];
    for (const auto& host : sw.nodes) {
      if (!seen.insert(host).second) {
        b.Note("host " + host + " is under more than one leaf: it is kept under the first");
        continue;
      }
      b.Add(host, name, parent.count(name) ? parent[name] : name);
    }
  }
  return b.Take(source);
}

namespace {

// ibnetdiscover's dump as read: each switch by id (its GUID), with the hosts and switches on its
// ports.
struct IbSwitch {
  std::string name;
  std::vector<std::pair<std::string, std::string>> hosts;  // (host, HCA description)
  std::set<std::string> uplinks;                           // switch ids
};
struct IbFabric {
  std::map<std::string, IbSwitch> switches;
  std::map<std::string, std::string> names;  // switch id -> name, of every switch seen
  std::vector<std::string> order;            // switch ids as their blocks came
};

// "MF0;leaf-01:MQM8700/U1" -> leaf-01.
std::string IbSwitchName(const std::string& desc) {
  const size_t semi = desc.find(';');
  std::string n = semi == std::string::npos ? desc : desc.substr(semi + 1);
  if (const size_t colon = n.find(':'); colon != std::string::npos) n.resize(colon);
  return Trim(n);
}

StatusOr<IbFabric> ReadIbnetdiscover(std::string_view text, const std::string& source) {
  static const std::regex block_re(
      R"re(^\s*(Switch|Ca)\s+\d+\s+"([SH]-[0-9a-fA-F]+)"[^#]*#\s*"([^"]*)")re");
  static const std::regex port_re(
      R"re(^\s*\[\d+\](?:\([0-9a-fA-F]+\))?\s+"([SH]-[0-9a-fA-F]+)"\[\d+\][^#]*#\s*"([^"]*)")re");
  IbFabric f;
  std::string current;  // the switch whose ports follow ("" inside a Ca block)
  const std::vector<std::string> lines = Lines(text);
  for (size_t i = 0; i < lines.size(); ++i) {
    std::smatch m;
    if (std::regex_search(lines[i], m, block_re)) {
      current = m[1] == "Switch" ? m[2].str() : "";
      if (!current.empty() && !f.switches.count(current)) {
        f.order.push_back(current);
        f.switches[current].name = f.names[current] = IbSwitchName(m[3]);
      }
      continue;
    }
    if (current.empty() || !std::regex_search(lines[i], m, port_re)) continue;
    const std::string peer = m[1], desc = m[2];
    if (peer[0] == 'H') {
      std::istringstream words(desc);
      std::string host;
      words >> host;
      if (host.empty())
        return LineError(source, i + 1, "an HCA without a description: its host cannot be named");
      f.switches[current].hosts.emplace_back(host, desc);
    } else {
      f.switches[current].uplinks.insert(peer);
      if (!f.names.count(peer)) f.names[peer] = IbSwitchName(desc);
    }
  }
  return f;
}

// The spine block of a leaf: named after the first of its uplinks; leaves with the same uplinks
// share it. A leaf without uplinks is a block of its own.
std::string IbBlock(const IbFabric& f, const IbSwitch& leaf,
                    std::map<std::set<std::string>, std::string>* blocks) {
  std::set<std::string> up;
  for (const auto& u : leaf.uplinks) {
    auto it = f.switches.find(u);
    if (it == f.switches.end() || it->second.hosts.empty())
      up.insert(u);  // leaves linked to leaves are not uplinks
  }
  if (up.empty()) return leaf.name;
  std::vector<std::string> names;
  for (const auto& u : up) names.push_back(f.names.at(u));
  return blocks->try_emplace(up, *std::min_element(names.begin(), names.end())).first->second;
}

}  // namespace

// ibnetdiscover's dump: `Switch N "S-GUID" # "DESC" ...` blocks whose port lines name the peer
// (`[1] "H-GUID"[1](...) # "gpu-001 HCA-1" ...`). A switch with hosts on its ports is a leaf;
// the switches above it are its uplinks, and leaves with the same uplinks are one spine block,
// named after the first of them. A host is its HCA description's first word; a host with HCAs
// on several leaves (rail-optimised wiring) sits under the leaf of its first HCA.
StatusOr<ImportedFabric> ImportIbnetdiscover(std::string_view text, const std::string& source) {
  HANGAR_ASSIGN_OR_RETURN(IbFabric f, ReadIbnetdiscover(text, source));
  std::map<std::string, std::pair<std::string, std::string>> first_hca;  // host -> (desc, leaf id)
  for (const auto& id : f.order) {
    for (const auto& [host, desc] : f.switches[id].hosts) {
      auto [it, fresh] = first_hca.try_emplace(host, desc, id);
      if (!fresh && desc < it->second.first) it->second = {desc, id};
    }
  }
  FabricBuilder b;
  std::map<std::set<std::string>, std::string> blocks;  // uplink set -> block name
  size_t multi = 0;
  for (const auto& id : f.order) {
    const IbSwitch& s = f.switches[id];
    if (s.hosts.empty()) continue;
    const std::string block = IbBlock(f, s, &blocks);
    for (const auto& [host, desc] : s.hosts) {
      if (first_hca[host].second != id || first_hca[host].first != desc) {
        ++multi;
        continue;
      }
      b.Add(host, s.name, block);
    }
  }
  if (multi > 0) {
    b.Note(std::to_string(multi) +
           " HCA(s) of hosts with several HCAs on other leaves are left out: a host sits under the "
           "leaf of its first "
           "HCA");
  }
  return b.Take(source);
}

// "host,leaf,spine[,core...]" per line (a header line starting with "host" is skipped): the
// host's switch at each layer, lowest first. Without a spine column, every leaf is under spine-0.
StatusOr<ImportedFabric> ImportHostCsv(std::string_view text, const std::string& source) {
  FabricBuilder b;
  std::set<std::string> seen;
  const std::vector<std::string> lines = Lines(text);
  bool core = false;
  for (size_t i = 0; i < lines.size(); ++i) {
    const std::string line = Trim(lines[i]);
    if (line.empty() || line[0] == '#') continue;
    std::vector<std::string> cols;
    std::stringstream in(line);
    for (std::string c; std::getline(in, c, ',');) cols.push_back(Trim(c));
    if (!cols.empty() && (cols[0] == "host" || cols[0] == "hostname" || cols[0] == "node"))
      continue;  // a header
    if (cols.size() < 2 || cols[0].empty() || cols[1].empty()) {
      return LineError(
          source, i + 1,
          "want host,leaf[,spine[,core]]: a host and its switch per layer, lowest first");
    }
    if (!seen.insert(cols[0]).second)
      return LineError(source, i + 1, "host '" + cols[0] + "' is listed twice");
    core = core || cols.size() > 3;
    b.Add(cols[0], cols[1], cols.size() > 2 && !cols[2].empty() ? cols[2] : "spine-0");
  }
  if (core)
    b.Note(
        "layers above the spine column join every spine block, as the cluster does: they are not "
        "kept");
  return b.Take(source);
}

StatusOr<ImportedFabric> ImportFabric(std::string_view format, std::string_view text,
                                      const std::string& source) {
  if (format == "slurm") return ImportSlurmTopology(text, source);
  if (format == "ibnetdiscover") return ImportIbnetdiscover(text, source);
  if (format == "csv") return ImportHostCsv(text, source);
  return Status::InvalidArgument("unknown topology format '" + std::string(format) +
                                 "'; use slurm (topology.conf), ibnetdiscover or csv");
}

std::string NormalizeGuid(std::string_view text) {
  std::string hex;
  if (text.substr(0, 2) == "0x" || text.substr(0, 2) == "0X") text.remove_prefix(2);
  for (char c : text) {
    if (c == ':') continue;
    if (!std::isxdigit(static_cast<unsigned char>(c))) return "";
    hex += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  }
  if (hex.empty() || hex.size() > 16) return "";
  return std::string(16 - hex.size(), '0') + hex;
}

// A switch block's port line with an HCA at the other end:
// `[3]  "H-0002c90300a1000c"[1](2c90300a1000d)  # "gpu-003 HCA-1" lid 14 4xHDR`.
std::vector<IbHcaLink> IbnetdiscoverHcaLinks(std::string_view text) {
  static const std::regex block_re(
      R"re(^\s*(Switch|Ca)\s+\d+\s+"[SH]-([0-9a-fA-F]+)"[^#]*#\s*"([^"]*)")re");
  static const std::regex hca_re(
      R"re(^\s*\[(\d+)\](?:\([0-9a-fA-F]+\))?\s+"H-([0-9a-fA-F]+)"\[(\d+)\](?:\(([0-9a-fA-F]+)\))?)re");
  std::vector<IbHcaLink> out;
  std::string guid, name;  // the switch whose ports follow ("" inside a Ca block)
  for (const std::string& line : Lines(text)) {
    std::smatch m;
    if (std::regex_search(line, m, block_re)) {
      guid = m[1] == "Switch" ? NormalizeGuid(m[2].str()) : "";
      name = IbSwitchName(m[3]);
      continue;
    }
    if (guid.empty() || !std::regex_search(line, m, hca_re)) continue;
    IbHcaLink l;
    l.switch_port = static_cast<uint32_t>(std::strtoul(m[1].str().c_str(), nullptr, 10));
    l.hca_guid = NormalizeGuid(m[2].str());
    l.hca_port = static_cast<uint32_t>(std::strtoul(m[3].str().c_str(), nullptr, 10));
    l.port_guid = m[4].matched ? NormalizeGuid(m[4].str()) : "";
    l.switch_guid = guid;
    l.switch_name = name;
    out.push_back(std::move(l));
  }
  return out;
}

}  // namespace hangar::cluster
