// bench/mig_packing: how many MIG instances a cluster takes, and how fast they are placed.
//
// 128 nodes x 8 H100-80GB GPUs in MIG mode. A stream of 6,000 single-instance requests (profiles
// drawn with fixed weights: 1g.10gb 30%, 1g.20gb 10%, 2g.20gb 20%, 3g.40gb 20%, 4g.40gb 10%,
// 7g.80gb 10%; seed 1) is offered one at a time; a request that does not fit is skipped, never
// retried. With --churn, each placed instance ends after a lifetime drawn for its request
// (2,000 to 4,000 later arrivals), so layouts fragment as they would in a running cluster. Two
// placers see the same stream:
//   hangar      the production GangPlacer (node, GPU and start slice chosen to keep large shapes
//               possible: cluster/mig_geometry.h)
//   first-fit   the first GPU (lowest index) with a free allowed start, at its lowest start
// Prints, per placer: instances placed, compute and memory slices used (% of the cluster) and
// the 4g/7g requests refused; for hangar also microseconds per placement (p50/p99).
//
//   mig_packing [--churn] [--json]
#include <algorithm>
#include <bit>
#include <climits>
#include <cstdio>
#include <cstring>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cluster/cluster_yaml.h"
#include "cluster/mig_geometry.h"
#include "common/random.h"
#include "common/time.h"
#include "sched/placement/gang_placer.h"
#include "sched/placement/scorer.h"

namespace hangar {
namespace {

using cluster::ClusterUsage;
using cluster::MigShape;

constexpr const char* kProfiles[] = {"1g.10gb", "1g.20gb", "2g.20gb",
                                     "3g.40gb", "4g.40gb", "7g.80gb"};
constexpr int kWeights[] = {30, 10, 20, 20, 10, 10};
constexpr int kRequests = 6000;

std::shared_ptr<const cluster::Topology> MigCluster() {
  auto f = cluster::ParseClusterYaml(
      "name: mig\nnode_defaults: {gpus: 8, gpu_model: H100-SXM-80GB, gpu_memory: 80Gi, cpu: 192, "
      "memory: 2Ti, mig: true}\nfat_tree: {spines: 1, leaves_per_spine: 4, nodes_per_leaf: 32}\n",
      "generated");
  if (!f.ok()) {
    std::fprintf(stderr, "%s\n", f.status().ToString().c_str());
    std::exit(1);
  }
  return f->topology;
}

struct Arrival {
  int shape;
  int ends_after;  // arrivals; INT32_MAX without churn
};

std::vector<Arrival> Stream(bool churn) {
  Random rng(1);
  std::vector<Arrival> out;
  for (int i = 0; i < kRequests; ++i) {
    int r = static_cast<int>(rng.Uniform(100)), k = 0;
    while (r >= kWeights[k]) r -= kWeights[k++];
    const int life = 2000 + static_cast<int>(rng.Uniform(2001));
    out.push_back({k, churn ? i + life : INT32_MAX});
  }
  return out;
}

// Placed instances, ended when the stream reaches their end.
struct Running {
  std::vector<std::pair<int, cluster::GangAssignment>> live;
  void EndBefore(int i, ClusterUsage& u) {
    auto it = std::partition(live.begin(), live.end(), [&](const auto& e) { return e.first > i; });
    for (auto e = it; e != live.end(); ++e) u.Release(e->second);
    live.erase(it, live.end());
  }
};

sched::GangRequest Request(int k) {
  sched::TaskShape s;
  const auto& info = cluster::ShapeInfo(static_cast<MigShape>(k));
  s.SetMigProfile(kProfiles[k], info.compute_slices, int64_t{std::atoi(kProfiles[k] + 3)} * 1024);
  s.milli_cpu = 1000;
  s.memory_mib = 4096;
  return sched::MakeSingleTaskRequest(s);
}

struct Outcome {
  int placed = 0;
  int refused_large = 0;  // 4g and 7g requests that found no room
  double compute_pct = 0, memory_pct = 0;
  std::vector<double> us;
};

void Measure(const ClusterUsage& u, Outcome* o) {
  int64_t compute = 0, memory = 0;
  const size_t gpus = u.topology().gpus().size();
  for (uint32_t g = 0; g < gpus; ++g) {
    compute += cluster::kMigComputeSlices - u.gpu_free_milli(g);
    memory += std::popcount(u.gpu_mig_taken(g));
  }
  o->compute_pct = 100.0 * compute / (gpus * cluster::kMigComputeSlices);
  o->memory_pct = 100.0 * memory / (gpus * cluster::kMigMemorySlices);
}

Outcome RunHangar(const std::vector<Arrival>& stream) {
  ClusterUsage u(MigCluster());
  auto scorer = std::move(sched::placement::MakeScorer("hangar")).value();
  sched::placement::GangPlacer placer;
  sched::placement::PlaceOptions opts{scorer.get(), nullptr, nullptr, 1};
  std::vector<sched::GangRequest> requests;
  for (int k = 0; k < cluster::kMigShapes; ++k) requests.push_back(Request(k));
  Outcome o;
  Running running;
  for (int i = 0; i < kRequests; ++i) {
    running.EndBefore(i, u);
    const int k = stream[i].shape;
    const int64_t t0 = MonotonicNanos();
    sched::placement::PlaceResult r = placer.Place(u, requests[k], opts);
    if (r.placed) {
      o.us.push_back((MonotonicNanos() - t0) / 1e3);
      running.live.emplace_back(stream[i].ends_after, std::move(r.assignment));
    }
    o.placed += r.placed;
    o.refused_large += !r.placed && k >= 4;
  }
  Measure(u, &o);
  return o;
}

Outcome RunFirstFit(const std::vector<Arrival>& stream) {
  ClusterUsage u(MigCluster());
  Outcome o;
  Running running;
  for (int i = 0; i < kRequests; ++i) {
    running.EndBefore(i, u);
    const int k = stream[i].shape;
    const auto shape = static_cast<MigShape>(k);
    bool placed = false;
    for (uint32_t g = 0; g < u.topology().gpus().size() && !placed; ++g) {
      for (int s = 0; s < cluster::kMigMemorySlices && !placed; ++s) {
        if (!cluster::MigFitsAt(u.gpu_mig_taken(g), shape, s)) continue;
        cluster::GangAssignment a;
        a.grants.push_back({g, cluster::ShapeInfo(shape).compute_slices, 0, static_cast<int8_t>(s),
                            static_cast<uint8_t>(k)});
        a.tasks.push_back({u.topology().gpus()[g].node, 0, 0, 1000, 4096, 0, 1});
        placed = u.Allocate(a).ok();
        if (placed) running.live.emplace_back(stream[i].ends_after, std::move(a));
      }
    }
    o.placed += placed;
    o.refused_large += !placed && k >= 4;
  }
  Measure(u, &o);
  return o;
}

double Percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(p * (v.size() - 1) + 0.5))];
}

}  // namespace
}  // namespace hangar

int main(int argc, char** argv) {
  using namespace hangar;
  bool json = false, churn = false;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--json"))
      json = true;
    else if (!std::strcmp(argv[i], "--churn"))
      churn = true;
    else {
      std::fprintf(stderr, "usage: mig_packing [--churn] [--json]\n");
      return 2;
    }
  }
  const std::vector<Arrival> stream = Stream(churn);
  nlohmann::json out;
  for (const char* name : {"hangar", "first-fit"}) {
    const bool ours = !std::strcmp(name, "hangar");
    Outcome o = ours ? RunHangar(stream) : RunFirstFit(stream);
    nlohmann::json j = {{"placed", o.placed},
                        {"compute_slices_used_pct", o.compute_pct},
                        {"memory_slices_used_pct", o.memory_pct},
                        {"large_refused", o.refused_large}};
    if (ours) j["place_us_p50"] = Percentile(o.us, 0.5), j["place_us_p99"] = Percentile(o.us, 0.99);
    out[name] = j;
    if (!json) {
      std::printf(
          "%-10s placed %d of %d, compute slices used %.1f%%, memory slices %.1f%%, 4g/7g refused "
          "%d",
          name, o.placed, kRequests, o.compute_pct, o.memory_pct, o.refused_large);
      if (ours)
        std::printf(", %.1f / %.1f us per placement (p50/p99)", Percentile(o.us, 0.5),
                    Percentile(o.us, 0.99));
      std::printf("\n");
    }
  }
  if (json) std::printf("%s\n", out.dump(2).c_str());
  return 0;
}
