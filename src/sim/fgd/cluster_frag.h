// The cluster's fragmentation, Σ F(n) over all nodes against a workload profile, kept up to date
// as pods land: only the node that changed is measured again.
#pragma once

#include <cstdint>
#include <vector>

#include "cluster/usage.h"
#include "sched/placement/fragmentation.h"

namespace hangar::sim::fgd {

class ClusterFragmentation {
 public:
  // Measures every node of `usage`. The profile must outlive this object.
  ClusterFragmentation(const cluster::ClusterUsage& usage, const sched::WorkloadProfile& profile);

  // Measures node n again after a change on it.
  void Update(const cluster::ClusterUsage& usage, uint32_t n);

  // Σ F(n) in milli-GPU. The sum is kept in fixed point (2^-32 milli-GPU), so it is exact,
  // independent of update order, and does not drift over thousands of updates.
  double total_milli() const { return static_cast<double>(sum_fixed_) / kScale; }
  double node_milli(uint32_t n) const { return per_node_[n]; }

 private:
  static constexpr double kScale = 4294967296.0;  // 2^32

  const sched::WorkloadProfile& profile_;
  std::vector<double> per_node_;
  std::vector<int64_t> fixed_;
  int64_t sum_fixed_ = 0;
  std::vector<int32_t> free_;  // scratch
};

}  // namespace hangar::sim::fgd
