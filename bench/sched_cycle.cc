// bench/sched_cycle: how fast one scheduling cycle is.
//
//  1. One Scheduler::Cycle with 100,000 pending 1-GPU jobs on an empty cluster: the 1,024-node
//     example and a generated 10,240-node x 8-GPU fat-tree. Prints decisions and placements per
//     second (a placement is one job placed; every examined job is one decision).
//  2. Microseconds per gang placement (p50/p99) for gangs of 1, 8, 64 and 512 GPUs, placed one
//     after another on a cluster already half full of 1-8 GPU jobs (placed by the same placer),
//     until the cluster refuses one. Only successful placements count.
//
//   sched_cycle [--json] [--quick]
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cluster/cluster_yaml.h"
#include "common/random.h"
#include "common/time.h"
#include "sched/scheduler.h"

namespace hangar {
namespace {

using cluster::ClusterUsage;
using cluster::Topology;

std::shared_ptr<const Topology> FatTree(int spines, int leaves, int nodes) {
  char yaml[512];
  std::snprintf(yaml, sizeof yaml,
                "name: ft\nnode_defaults: {gpus: 8, gpu_model: H100-SXM-80GB, gpu_memory: 80Gi, "
                "cpu: 192, memory: 2Ti}\nfat_tree: {spines: %d, leaves_per_spine: %d, "
                "nodes_per_leaf: %d}\n",
                spines, leaves, nodes);
  auto f = cluster::ParseClusterYaml(yaml, "generated");
  if (!f.ok()) {
    std::fprintf(stderr, "%s\n", f.status().ToString().c_str());
    std::exit(1);
  }
  return f->topology;
}

sched::GangRequest Gang(int replicas, int gpus) {
  sched::TaskShape s;
  s.kind = job::GpuKind::kWhole;
  s.gpus = gpus;
  s.milli = 1000;
  s.milli_cpu = 4000 * gpus;
  s.memory_mib = 32 * 1024 * gpus;
  return sched::MakeSingleTaskRequest(s, replicas);
}

struct CycleResult {
  double seconds = 0;
  size_t placements = 0;
  size_t decisions = 0;
};

CycleResult OneCycle(std::shared_ptr<const Topology> topo, int pending) {
  ClusterUsage usage(topo);
  sched::GangRequest one = Gang(1, 1);
  std::vector<sched::PendingJob> jobs(pending);
  for (int i = 0; i < pending; ++i) {
    jobs[i].id = i + 1;
    jobs[i].request = &one;
    jobs[i].submit = i;
    jobs[i].seq = i;
  }
  auto s = std::move(sched::Scheduler::Create({})).value();
  sched::Snapshot snap;
  snap.usage = &usage;
  snap.pending = jobs;
  snap.cpu_only_pending = 0;
  const int64_t t0 = MonotonicNanos();
  sched::Decisions d = s->Cycle(snap, 0);
  CycleResult r;
  r.seconds = (MonotonicNanos() - t0) / 1e9;
  r.placements = d.placements.size();
  r.decisions = d.placements.size() + d.waiting.size() + (pending - d.examined);
  return r;
}

// Fills about `fraction` of the GPUs with 1-8 GPU single-node jobs of random sizes.
void HalfFill(ClusterUsage& u, double fraction, uint64_t seed) {
  Random rng(seed);
  auto scorer = std::move(sched::placement::MakeScorer("hangar")).value();
  sched::placement::GangPlacer placer;
  sched::placement::PlaceOptions o{scorer.get(), nullptr, nullptr, seed};
  const int64_t target = static_cast<int64_t>(u.topology().total_gpus() * fraction);
  int64_t used = 0;
  while (used < target) {
    const int g = 1 + static_cast<int>(rng.Uniform(8));
    sched::GangRequest r = Gang(1, g);
    if (!placer.Place(u, r, o).placed) break;
    used += g;
  }
}

double Percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(p * (v.size() - 1) + 0.5))];
}

std::pair<double, double> GangLatency(std::shared_ptr<const Topology> topo, int gang_gpus,
                                      int rounds) {
  const int replicas = std::max(1, gang_gpus / 8);
  const int per = gang_gpus < 8 ? gang_gpus : 8;
  sched::GangRequest req = Gang(replicas, per);
  auto scorer = std::move(sched::placement::MakeScorer("hangar")).value();
  std::vector<double> us;
  for (int round = 0; round < rounds; ++round) {
    ClusterUsage u(topo);
    HalfFill(u, 0.5, 1000 + round);
    sched::placement::GangPlacer placer;
    sched::placement::PlaceOptions o{scorer.get(), nullptr, nullptr, 1};
    for (int i = 0; i < 200; ++i) {
      const int64_t t0 = MonotonicNanos();
      bool placed = placer.Place(u, req, o).placed;
      if (!placed) break;
      us.push_back((MonotonicNanos() - t0) / 1e3);
    }
  }
  return {Percentile(us, 0.50), Percentile(us, 0.99)};
}

}  // namespace
}  // namespace hangar

int main(int argc, char** argv) {
  using namespace hangar;
  bool json = false, quick = false;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--json"))
      json = true;
    else if (!std::strcmp(argv[i], "--quick"))
      quick = true;
    else {
      std::fprintf(stderr, "usage: sched_cycle [--json] [--quick]\n");
      return 2;
    }
  }
  const int pending = quick ? 20000 : 100000;
  const int rounds = quick ? 2 : 5;
  struct Cluster {
    const char* name;
    std::shared_ptr<const cluster::Topology> topo;
  };
  std::vector<Cluster> clusters;
  auto example = cluster::LoadClusterFile(std::string(HANGAR_SOURCE_DIR) +
                                          "/examples/clusters/fat-tree-1024.yaml");
  if (!example.ok()) {
    std::fprintf(stderr, "%s\n", example.status().ToString().c_str());
    return 1;
  }
  clusters.push_back({"fat-tree-1024", example->topology});
  clusters.push_back({"fat-tree-10240", FatTree(10, 32, 32)});
  nlohmann::json out;
  out["pending_jobs"] = pending;
  for (const auto& c : clusters) {
    CycleResult r = OneCycle(c.topo, pending);
    nlohmann::json j;
    j["nodes"] = c.topo->nodes().size();
    j["gpus"] = c.topo->total_gpus();
    j["cycle_s"] = r.seconds;
    j["placements"] = r.placements;
    j["placements_per_s"] = r.placements / r.seconds;
    j["decisions_per_s"] = r.decisions / r.seconds;
    nlohmann::json p50, p99;
    for (int g : {1, 8, 64, 512}) {
      auto [a, b] = GangLatency(c.topo, g, rounds);
      p50[std::to_string(g)] = a;
      p99[std::to_string(g)] = b;
    }
    j["gang_p50_us"] = p50;
    j["gang_p99_us"] = p99;
    out[c.name] = j;
    if (!json) {
      std::printf("%s: %zu nodes, %lld GPUs, %d pending 1-GPU jobs\n", c.name,
                  c.topo->nodes().size(), static_cast<long long>(c.topo->total_gpus()), pending);
      std::printf("  one cycle: %.3f s, %zu placed, %.0f placements/s, %.0f decisions/s\n",
                  r.seconds, r.placements, r.placements / r.seconds, r.decisions / r.seconds);
      for (int g : {1, 8, 64, 512}) {
        std::printf("  gang of %3d GPUs: p50 %8.1f us  p99 %8.1f us\n", g,
                    p50[std::to_string(g)].get<double>(), p99[std::to_string(g)].get<double>());
      }
    }
  }
  // The headline figures: the 10,240-node cluster.
  out["placements_per_s"] = out["fat-tree-10240"]["placements_per_s"];
  out["gang_p50_us"] = out["fat-tree-10240"]["gang_p50_us"];
  out["gang_p99_us"] = out["fat-tree-10240"]["gang_p99_us"];
  if (json) std::printf("%s\n", out.dump(2).c_str());
  return 0;
}
