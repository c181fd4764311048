// `hangar topology import|diff|discover`: cluster.yaml's fabric from Slurm's topology.conf, an
// ibnetdiscover dump or a CSV of hosts per switch layer, and where a cluster.yaml disagrees with
// it, on files only (docs/topology-import.md); or, asking the controller, where cluster.yaml
// disagrees with what the agents discovered on the hardware, and a cluster.yaml written from it
// (docs/topology-discovery.md).
#include <fstream>
#include <map>
#include <sstream>

#include "cli/cli_commands.h"
#include "cli/cli_common.h"
#include "cli/client.h"
#include "cluster/cluster_yaml.h"
#include "cluster/topology_import.h"

namespace hangar::cli {
namespace {

struct TopologyOptions {
  std::string format, input, cluster, out;
  Common common;  // the controller, for diff and discover without a file
};

StatusOr<std::string> ReadFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return Status::NotFound(path + ": cannot open the file; check the path");
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

StatusOr<cluster::ImportedFabric> Read(const TopologyOptions& o) {
  HANGAR_ASSIGN_OR_RETURN(std::string text, ReadFile(o.input));
  HANGAR_ASSIGN_OR_RETURN(cluster::ImportedFabric f,
                          cluster::ImportFabric(o.format, text, o.input));
  for (const auto& n : f.notes) std::fprintf(stderr, "note: %s\n", n.c_str());
  return f;
}

Status Import(const TopologyOptions& o) {
  HANGAR_ASSIGN_OR_RETURN(cluster::ImportedFabric f, Read(o));
  std::string existing;
  if (!o.cluster.empty()) {
    HANGAR_ASSIGN_OR_RETURN(existing, ReadFile(o.cluster));
  }
  std::vector<std::string> missing;
  HANGAR_ASSIGN_OR_RETURN(std::string yaml, cluster::FabricYaml(f, existing, &missing));
  // What is written must load as a cluster file (with --cluster; alone it is a section).
  if (!existing.empty()) {
    auto check =
        cluster::ParseClusterYaml(yaml, o.out.empty() ? "the imported cluster file" : o.out);
    if (!check.ok()) return check.status();
  }
  if (!missing.empty()) {
    std::fprintf(stderr,
                 "note: %zu host(s) of the fabric are not in %s and take node_defaults: %s%s\n",
                 missing.size(), o.cluster.c_str(), missing.front().c_str(),
                 missing.size() > 1 ? ", ..." : "");
  }
  if (o.out.empty()) {
    std::printf("%s", yaml.c_str());
    return Status::Ok();
  }
  std::ofstream out(o.out);
  out << yaml;
  if (!out)
    return Status::Internal(o.out +
                            ": could not write the file; check the folder exists and is writable");
  size_t leaves = 0;
  for (const auto& s : f.spines) leaves += s.leaves.size();
  std::fprintf(stderr, "wrote %s: %zu hosts under %zu leaves in %zu spine blocks\n", o.out.c_str(),
               f.NumHosts(), leaves, f.spines.size());
  return Status::Ok();
}

Status DiffDiscovered(const TopologyOptions& o, int* rc);

Status Diff(const TopologyOptions& o, int* rc) {
  if (o.input.empty() || o.format.empty() || o.cluster.empty()) return DiffDiscovered(o, rc);
  HANGAR_ASSIGN_OR_RETURN(cluster::ImportedFabric f, Read(o));
  HANGAR_ASSIGN_OR_RETURN(cluster::ClusterFile c, cluster::LoadClusterFile(o.cluster));
  const std::vector<std::string> diff = cluster::DiffFabric(*c.topology, f);
  for (const auto& line : diff) std::printf("%s\n", line.c_str());
  if (diff.empty()) {
    std::printf("%s agrees with the fabric: %zu nodes, %zu leaves, %zu spine blocks\n",
                o.cluster.c_str(), c.topology->nodes().size(), c.topology->leaves().size(),
                c.topology->spines().size());
  } else {
    *rc = 1;
  }
  return Status::Ok();
}

void AddInput(CLI::App* c, TopologyOptions* o, bool required) {
  auto* format =
      c->add_option("--format", o->format,
                    "slurm (topology.conf), ibnetdiscover (its dump) or csv (host,leaf,spine)")
          ->check(CLI::IsMember({"slurm", "ibnetdiscover", "csv"}));
  auto* file = c->add_option("file", o->input, "The fabric's description");
  if (required) format->required(), file->required();
}

// What the agents discovered, as the controller assembled it.
Status DiffDiscovered(const TopologyOptions& o, int* rc) {
  if (!o.input.empty() || !o.format.empty()) {
    return Status::InvalidArgument(
        "give both --format and a file (and --cluster) to compare a file, or neither to compare "
        "the controller's cluster.yaml with what its agents discovered");
  }
  HANGAR_ASSIGN_OR_RETURN(auto r, ApiClient(o.common.server).Get("/v1/topology/diff"));
  if (o.common.output == "json") return PrintJson(r), Status::Ok();
  const auto& diff = r["disagreements"];
  for (const auto& d : diff) std::printf("%s\n", d.value("message", "").c_str());
  if (!diff.empty()) {
    *rc = 1;
    return Status::Ok();
  }
  std::printf("cluster.yaml agrees with what the agents discovered (%lld of %lld nodes told)\n",
              static_cast<long long>(r.value("reported", 0)),
              static_cast<long long>(r.value("declared", 0)));
  return Status::Ok();
}

// The discovered tree as the importers' (leaves under spine blocks), for FabricYaml.
cluster::ImportedFabric FabricOf(const nlohmann::json& tree) {
  cluster::ImportedFabric f;
  std::map<std::string, size_t> spine_of;
  for (const auto& l : tree.value("leaves", nlohmann::json::array())) {
    const std::string spine = l.value("spine", "spine-0");
    auto [it, fresh] = spine_of.try_emplace(spine, f.spines.size());
    if (fresh) f.spines.push_back({spine, {}});
    f.spines[it->second].leaves.push_back(
        {l.value("name", ""), l.value("nodes", std::vector<std::string>{})});
  }
  return f;
}

Status Discover(const TopologyOptions& o) {
  HANGAR_ASSIGN_OR_RETURN(auto r, ApiClient(o.common.server).Get("/v1/topology/discovered"));
  if (o.common.output == "json" && o.out.empty()) return PrintJson(r), Status::Ok();
  const cluster::ImportedFabric f = FabricOf(r["tree"]);
  std::string existing;
  if (!o.cluster.empty()) {
    HANGAR_ASSIGN_OR_RETURN(existing, ReadFile(o.cluster));
  }
  HANGAR_ASSIGN_OR_RETURN(std::string yaml, cluster::FabricYaml(f, existing));
  if (!existing.empty()) {
    auto check =
        cluster::ParseClusterYaml(yaml, o.out.empty() ? "the discovered cluster file" : o.out);
    if (!check.ok()) return check.status();
  }
  const size_t unplaced = r["tree"].value("unplaced", nlohmann::json::array()).size();
  if (unplaced > 0) {
    std::fprintf(stderr,
                 "note: %zu node(s) told no switch (no agent, or no ibnetdiscover dump): they keep "
                 "their declared leaf\n",
                 unplaced);
  }
  if (o.out.empty()) {
    std::printf("%s", yaml.c_str());
    return Status::Ok();
  }
  std::ofstream out(o.out);
  out << yaml;
  if (!out)
    return Status::Internal(o.out +
                            ": could not write the file; check the folder exists and is writable");
  size_t leaves = 0;
  for (const auto& sp : f.spines) leaves += sp.leaves.size();
  std::fprintf(stderr, "wrote %s: %zu nodes under %zu leaves in %zu spine blocks\n", o.out.c_str(),
               f.NumHosts(), leaves, f.spines.size());
  return Status::Ok();
}

}  // namespace

void RegisterTopologyCommands(CLI::App& app, int* rc) {
  CLI::App* topo = app.add_subcommand(
      "topology",
      "cluster.yaml's fabric from the formats fleets have (docs/topology-import.md) or from what "
      "the agents discovered (docs/topology-discovery.md)");
  topo->require_subcommand(1);
  auto io = std::make_shared<TopologyOptions>();
  CLI::App* import = topo->add_subcommand(
      "import", "Write cluster.yaml's fabric: section (or, with --cluster, the whole file)");
  AddInput(import, io.get(), true);
  import->add_option("--cluster", io->cluster,
                     "An existing cluster.yaml: its settings and node fields are kept");
  import->add_option("-o,--out", io->out, "Where to write it (default: standard output)");
  import->callback([=] { Guard(rc, [&] { return Import(*io);
});
}  // namespace hangar::cli
);
auto d = std::make_shared<TopologyOptions>();
CLI::App* diff = topo->add_subcommand(
    "diff",
    "Where cluster.yaml disagrees with the fabric: nodes on the wrong leaf. With --format FILE "
    "--cluster FILE, against that file; without, against what the controller's agents "
    "discovered");
AddInput(diff, d.get(), false);
diff->add_option("--cluster", d->cluster, "The cluster.yaml to check (with --format FILE)");
AddCommon(diff, &d->common);
diff->callback([=] { Guard(rc, [&] { return Diff(*d, rc); }); });
auto w = std::make_shared<TopologyOptions>();
CLI::App* discover = topo->add_subcommand(
    "discover",
    "cluster.yaml's fabric: section from what the agents discovered (the leaf switch each "
    "node's InfiniBand port is cabled to), or with --cluster the whole file");
discover->add_option("--write", w->out, "Where to write it (default: standard output)");
discover->add_option("--cluster", w->cluster,
                     "An existing cluster.yaml: its settings and node fields are kept");
AddCommon(discover, &w->common);
discover->callback([=] { Guard(rc, [&] { return Discover(*w); }); });
}

}  // namespace hangar::cli
