// Which job next: the order in which a cycle considers pending jobs. A policy maps each job to a
// key that depends on the job alone, so an owner that keeps its pending jobs sorted by the key
// (the simulator does) can hand them over presorted.
#pragma once

#include <compare>
#include <cstdint>
#include <memory>
#include <span>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "sched/snapshot.h"

namespace hangar::sched::queue {

struct OrderKey {
  int64_t a = 0, b = 0, c = 0, d = 0;
  auto operator<=>(const OrderKey&) const = default;
};

class QueuePolicy {
 public:
  virtual ~QueuePolicy() = default;
  virtual std::string_view name() const = 0;
  // Smaller keys go first.
  virtual OrderKey Key(const PendingJob& job) const = 0;
};

struct QueueParams {
  std::vector<int64_t> las_thresholds;  // GPU-ms service levels for "las" (empty: continuous)
};

// "priority": higher priority first, then earlier submission (the default).
// "fifo": earlier submission first, whatever the priority.
// "sjf": shortest time limit first (jobs without one last), then submission.
// "las": least attained service first (Tiresias): by service level when thresholds are given,
//        then submission.
// "gittins": lowest rank first (PendingJob::rank, which the owner computes; see gittins.h),
//        then submission.
StatusOr<std::unique_ptr<QueuePolicy>> MakeQueuePolicy(std::string_view name,
                                                       const QueueParams& params = {});
const std::vector<std::string_view>& QueuePolicyNames();

// Indices into `jobs` in policy order; ties broken by seq then id, so the order is total.
void OrderJobs(const QueuePolicy& policy, std::span<const PendingJob> jobs,
               std::vector<uint32_t>* order);

}  // namespace hangar::sched::queue
