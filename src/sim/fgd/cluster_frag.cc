#include "sim/fgd/cluster_frag.h"

#include <cmath>

#include "sched/placement/scorer.h"

namespace hangar::sim::fgd {

ClusterFragmentation::ClusterFragmentation(const cluster::ClusterUsage& usage,
                                           const sched::WorkloadProfile& profile)
    : profile_(profile) {
  const size_t n = usage.topology().nodes().size();
  per_node_.assign(n, 0.0);
  fixed_.assign(n, 0);
  for (uint32_t i = 0; i < n; ++i) Update(usage, i);
}

void ClusterFragmentation::Update(const cluster::ClusterUsage& usage, uint32_t n) {
  const cluster::NodeInfo& node = usage.topology().nodes()[n];
  sched::placement::FreeMilliOf(usage, n, &free_);
  const sched::NodeView view{usage.node(n).free_cpu, node.num_gpus > 0, node.model, free_};
  per_node_[n] = sched::NodeFragmentation(profile_, view);
  const int64_t fixed = std::llround(per_node_[n] * kScale);
  sum_fixed_ += fixed - fixed_[n];
  fixed_[n] = fixed;
}

}  // namespace hangar::sim::fgd
