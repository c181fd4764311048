// bench/imported_fabric: placement on a fabric imported from Slurm's topology.conf.
//
// Writes a three-layer fat tree's topology.conf (4 pods x 6 leaves x 36 hosts = 864 hosts by
// default: leaves, pod spines, one core), imports it (cluster/topology_import.h), loads the
// written cluster.yaml, then offers 20,000 gangs of whole 8-GPU nodes (sizes drawn from 1, 2, 4,
// 8, 16, 30, 36 and 72 nodes, seed 1) to the production GangPlacer with churn: each placed gang
// ends after 20 to 60 later arrivals; a gang that does not fit is skipped. For each placement it
// notes the smallest level (node, leaf, spine block, cluster) with a domain that had room for the
// gang at that moment, and whether the gang landed inside one domain of that level.
// Prints: hosts, import and load time, placements, the share inside the smallest domain with
// room, placements by locality, and microseconds per placement (p50/p99).
//
//   imported_fabric [--pods N] [--leaves N] [--hosts N] [--json]
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <deque>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cluster/cluster_yaml.h"
#include "cluster/topology_import.h"
#include "common/random.h"
#include "common/time.h"
#include "sched/placement/gang_placer.h"
#include "sched/placement/scorer.h"
#include "sched/request.h"

namespace hangar {
namespace {

using cluster::Level;

std::string TopologyConf(int pods, int leaves, int hosts) {
  std::string t;
  int host = 0;
  for (int p = 0; p < pods; ++p) {
    std::string names;
    for (int l = 0; l < leaves; ++l) {
      const std::string name = "leaf-" + std::to_string(p) + "-" + std::to_string(l);
      t += "SwitchName=" + name + " Nodes=h[" + std::to_string(100000 + host) + "-" +
           std::to_string(100000 + host + hosts - 1) + "]\n";
      host += hosts;
      names += (names.empty() ? "" : ",") + name;
    }
    t += "SwitchName=spine-" + std::to_string(p) + " Switches=" + names + "\n";
  }
  std::string spines;
  for (int p = 0; p < pods; ++p)
    spines += (p ? "," : "") + std::string("spine-") + std::to_string(p);
  return t + "SwitchName=core Switches=" + spines + "\n";
}

Level SmallestWithRoom(const cluster::ClusterUsage& u, int nodes) {
  for (Level level : {Level::kNode, Level::kLeaf, Level::kSpine}) {
    for (uint32_t d = 0; d < u.topology().NumDomains(level); ++d) {
      if (u.WholeGpuCapacity(level, d, 8) >= nodes) return level;
    }
  }
  return Level::kCluster;
}

int Run(int pods, int leaves, int hosts, bool json) {
  const int64_t t0 = MonotonicNanos();
  auto f = cluster::ImportSlurmTopology(TopologyConf(pods, leaves, hosts), "topology.conf");
  auto yaml = f.ok() ? cluster::FabricYaml(*f) : StatusOr<std::string>(f.status());
  auto c = yaml.ok() ? cluster::ParseClusterYaml(
                           "node_defaults: {gpus: 8, gpu_model: H100, gpu_memory: 80Gi, cpu: 192, "
                           "memory: 2Ti}\n" +
                               *yaml,
                           "imported")
                     : StatusOr<cluster::ClusterFile>(yaml.status());
  if (!c.ok()) {
    std::fprintf(stderr, "%s\n", c.status().ToString().c_str());
    return 1;
  }
  const double import_ms = static_cast<double>(MonotonicNanos() - t0) / 1e6;
  const auto& t = *c->topology;
  cluster::ClusterUsage u(c->topology);
  auto scorer = sched::placement::MakeScorer("best-fit");
  sched::placement::GangPlacer placer;
  sched::placement::PlaceOptions o{scorer->get(), nullptr, nullptr, 1};
  const int sizes[] = {1, 2, 4, 8, 16, 30, 36, 72};
  std::vector<sched::GangRequest> reqs;
  for (int s : sizes) {
    sched::TaskShape shape;
    shape.kind = job::GpuKind::kWhole;
    shape.gpus = 8;
    shape.milli = 1000;
    reqs.push_back(sched::MakeSingleTaskRequest(shape, s));
  }
  Random rng(1);
  std::deque<std::pair<int, cluster::GangAssignment>> live;  // (ends at arrival, assignment)
  int placed = 0, smallest = 0;
  int by_level[5] = {0, 0, 0, 0, 0};
  std::vector<double> us;
  for (int i = 0; i < 20000; ++i) {
    std::sort(live.begin(), live.end(),
              [](const auto& a, const auto& b) { return a.first < b.first; });
    while (!live.empty() && live.front().first <= i) {
      u.Release(live.front().second);
      live.pop_front();
    }
    const int k = static_cast<int>(rng.Uniform(8));
    const Level want = SmallestWithRoom(u, sizes[k]);
    const int64_t s0 = MonotonicNanos();
    sched::placement::PlaceResult r = placer.Place(u, reqs[static_cast<size_t>(k)], o);
    us.push_back(static_cast<double>(MonotonicNanos() - s0) / 1e3);
    if (!r.placed) continue;
    ++placed;
    const Level got = sched::placement::LocalityOf(t, r.assignment);
    by_level[static_cast<int>(got)]++;
    smallest += got <= want;
    live.emplace_back(i + 20 + static_cast<int>(rng.Uniform(41)), std::move(r.assignment));
  }
  std::sort(us.begin(), us.end());
  const double p50 = us[us.size() / 2], p99 = us[us.size() * 99 / 100];
  const double share = placed ? 100.0 * smallest / placed : 0;
  if (json) {
    std::printf("%s\n", nlohmann::json{{"hosts", t.nodes().size()},
                                       {"leaves", t.leaves().size()},
                                       {"spine_blocks", t.spines().size()},
                                       {"import_ms", import_ms},
                                       {"placements", placed},
                                       {"smallest_domain_pct", share},
                                       {"node", by_level[0] + by_level[1]},
                                       {"leaf", by_level[2]},
                                       {"spine", by_level[3]},
                                       {"cluster", by_level[4]},
                                       {"place_us_p50", p50},
                                       {"place_us_p99", p99}}
                            .dump()
                            .c_str());
    return 0;
  }
  std::printf("imported %zu hosts, %zu leaves, %zu spine blocks from topology.conf in %.1f ms\n",
              t.nodes().size(), t.leaves().size(), t.spines().size(), import_ms);
  std::printf("placements %d of 20000 gangs; inside the smallest domain with room: %.2f%%\n",
              placed, share);
  std::printf("by locality: node %d, leaf %d, spine %d, cluster %d\n", by_level[0] + by_level[1],
              by_level[2], by_level[3], by_level[4]);
  std::printf("placement time: p50 %.1f us, p99 %.1f us\n", p50, p99);
  return 0;
}

}  // namespace
}  // namespace hangar

int main(int argc, char** argv) {
  int pods = 4, leaves = 6, hosts = 36;
  bool json = false;
  for (int i = 1; i < argc; ++i) {
    auto next = [&] { return i + 1 < argc ? std::atoi(argv[++i]) : 0; };
    if (!std::strcmp(argv[i], "--pods"))
      pods = next();
    else if (!std::strcmp(argv[i], "--leaves"))
      leaves = next();
    else if (!std::strcmp(argv[i], "--hosts"))
      hosts = next();
    else if (!std::strcmp(argv[i], "--json"))
      json = true;
    else {
      std::fprintf(stderr, "usage: imported_fabric [--pods N] [--leaves N] [--hosts N] [--json]\n");
      return 2;
    }
  }
  if (pods < 1 || leaves < 1 || hosts < 1) {
    std::fprintf(stderr, "--pods, --leaves and --hosts must be at least 1\n");
    return 2;
  }
  return hangar::Run(pods, leaves, hosts, json);
}
