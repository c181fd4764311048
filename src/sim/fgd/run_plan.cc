#include "sim/fgd/run_plan.h"

#include <utility>

#include "sim/fgd/go_rand.h"

namespace hangar::sim::fgd {

namespace {

// The simulator's informers each draw one watch timeout before the nodes get their priority
// prefixes; ten is the count that reproduces every published run.
constexpr int kInformerDraws = 10;

// Appends clones of uniformly drawn originals until one more would pass the target. The stop
// test adds the drawn pod's per-GPU milli, not its total (the simulator's quirk): a multi-GPU
// clone may overshoot, and a CPU-only clone can never stop the loop.
void TuneUp(const std::vector<OpenbPod>& pods, double target, int64_t total, GoRand& rng,
            std::vector<int32_t>* arrivals) {
  const int32_t n = static_cast<int32_t>(pods.size());
  for (;;) {
    const int32_t k = rng.Intn(n);
    if (static_cast<double>(total + pods[k].gpu_milli) > target) return;
    total += pods[k].TotalMilliGpu();
    arrivals->push_back(k);
  }
}

// Drops uniformly drawn positions of the shuffled list until the request fits the target.
void TuneDown(const std::vector<OpenbPod>& pods, double target, int64_t total, GoRand& rng,
              std::vector<int32_t>* arrivals) {
  while (static_cast<double>(total) > target && !arrivals->empty()) {
    const int32_t at = rng.Intn(static_cast<int32_t>(arrivals->size()));
    total -= pods[(*arrivals)[at]].TotalMilliGpu();
    arrivals->erase(arrivals->begin() + at);
  }
}

}  // namespace

RunPlan DrawRunPlan(const std::vector<OpenbPod>& pods, int32_t num_nodes, int64_t capacity_milli,
                    int64_t seed, double tune) {
  GoRand rng(seed);
  rng.Int63();  // evaluated as an argument of a debug log call that prints nothing
  RunPlan plan;
  const int32_t n = static_cast<int32_t>(pods.size());
  plan.arrivals.resize(n);
  for (int32_t i = 0; i < n; ++i) plan.arrivals[i] = i;
  rng.Shuffle(n, [&](int32_t i, int32_t j) { std::swap(plan.arrivals[i], plan.arrivals[j]); });
  if (tune > 0) {
    int64_t total = 0;
    for (const auto& p : pods) total += p.TotalMilliGpu();
    const double target = tune * static_cast<double>(capacity_milli);
    if (static_cast<double>(total) < target) {
      TuneUp(pods, target, total, rng, &plan.arrivals);
    } else if (static_cast<double>(total) > target) {
      TuneDown(pods, target, total, rng, &plan.arrivals);
    }
  }
  for (int i = 0; i < kInformerDraws; ++i) rng.Float64();
  plan.node_priority = rng.Perm(num_nodes);
  return plan;
}

}  // namespace hangar::sim::fgd
