// `hangar topology import|diff` (docs/topology-import.md): cluster.yaml's fabric from Slurm's
// topology.conf, an ibnetdiscover dump or a CSV of hosts per switch layer, and where a
// cluster.yaml disagrees with it. Works on files only; no controller is asked.
#include <fstream>
#include <sstream>

#include "cli/cli_commands.h"
#include "cli/cli_common.h"
#include "cluster/cluster_yaml.h"
#include "cluster/topology_import.h"

namespace hangar::cli {
namespace {

struct TopologyOptions {
  std::string format, input, cluster, out;
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

Status Diff(const TopologyOptions& o, int* rc) {
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

void AddInput(CLI::App* c, TopologyOptions* o) {
  c->add_option("--format", o->format,
                "slurm (topology.conf), ibnetdiscover (its dump) or csv (host,leaf,spine)")
      ->required()
      ->check(CLI::IsMember({"slurm", "ibnetdiscover", "csv"}));
  c->add_option("file", o->input, "The fabric's description")->required();
}

}  // namespace

void RegisterTopologyCommands(CLI::App& app, int* rc) {
  CLI::App* topo = app.add_subcommand(
      "topology", "cluster.yaml's fabric from the formats fleets have (docs/topology-import.md)");
  topo->require_subcommand(1);
  auto io = std::make_shared<TopologyOptions>();
  CLI::App* import = topo->add_subcommand(
      "import", "Write cluster.yaml's fabric: section (or, with --cluster, the whole file)");
  AddInput(import, io.get());
  import->add_option("--cluster", io->cluster,
                     "An existing cluster.yaml: its settings and node fields are kept");
  import->add_option("-o,--out", io->out, "Where to write it (default: standard output)");
  import->callback([=] { Guard(rc, [&] { return Import(*io);
});
}  // namespace hangar::cli
);
auto d = std::make_shared<TopologyOptions>();
CLI::App* diff = topo->add_subcommand(
    "diff", "Where cluster.yaml disagrees with the fabric: nodes on the wrong leaf");
AddInput(diff, d.get());
diff->add_option("--cluster", d->cluster, "The cluster.yaml to check")->required();
diff->callback([=] { Guard(rc, [&] { return Diff(*d, rc); }); });
}

}  // namespace hangar::cli
