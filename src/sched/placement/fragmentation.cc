#include "sched/placement/fragmentation.h"

#include <algorithm>
#include <atomic>
#include <tuple>

namespace hangar::sched {

namespace {
std::atomic<uint64_t> g_next_profile_id{1};
}

WorkloadProfile WorkloadProfile::FromCounts(std::vector<Count> counts, double coverage) {
  std::sort(counts.begin(), counts.end(), [](const Count& a, const Count& b) {
    if (a.count != b.count) return a.count > b.count;
    return std::tie(a.task.milli_cpu, a.task.milli, a.task.gpus, a.task.models_key) >
           std::tie(b.task.milli_cpu, b.task.milli, b.task.gpus, b.task.models_key);
  });
  int64_t total = 0;
  for (const auto& c : counts) total += c.count;
  WorkloadProfile p;
  p.id_ = g_next_profile_id.fetch_add(1);
  if (total == 0) return p;
  int64_t cum = 0;
  size_t kept = 0;
  for (; kept < counts.size(); ++kept) {
    cum += counts[kept].count;
    if (static_cast<double>(cum) / static_cast<double>(total) >= coverage) {
      ++kept;
      break;
    }
  }
  const double cum_share = static_cast<double>(cum) / static_cast<double>(total);
  for (size_t i = 0; i < kept; ++i) {
    TypicalTask t = counts[i].task;
    t.weight = (static_cast<double>(counts[i].count) / static_cast<double>(total)) / cum_share;
    p.tasks_.push_back(std::move(t));
  }
  double milli = 0;
  for (size_t i = 0; i < counts.size(); ++i) {
    const double share = static_cast<double>(counts[i].count) / static_cast<double>(total);
    milli += share * counts[i].task.gpus * counts[i].task.milli;
    if (i < kept) continue;
    TypicalTask t = counts[i].task;
    t.weight = share;
    p.rare_.push_back(std::move(t));
  }
  p.milli_per_task_ = milli;
  return p;
}

double NodeFragmentation(const WorkloadProfile& profile, const NodeView& node) {
  // FGD's buckets, in its order.
  enum { kLackBoth, kLackGpu, kSatisfied, kLackCpu, kXlSatisfied, kXrLackCpu, kNoAccess, kBuckets };
  double bucket[kBuckets] = {0, 0, 0, 0, 0, 0, 0};
  int64_t idle_sum = 0;
  for (int32_t f : node.free_milli) idle_sum += f;
  const double idle = static_cast<double>(idle_sum);
  for (const TypicalTask& t : profile.tasks()) {
    const bool cpu_fits = node.cpu_left >= t.milli_cpu;
    if (t.milli == 0) {
      bucket[cpu_fits ? kXlSatisfied : kXrLackCpu] += t.weight * idle;
      continue;
    }
    if (!node.has_gpus || !(t.models & (cluster::ModelMask{1} << node.model))) {
      bucket[kNoAccess] += t.weight * idle;
      continue;
    }
    int fitting = 0;
    int64_t below = 0;
    for (int32_t f : node.free_milli) {
      if (f >= t.milli)
        ++fitting;
      else
        below += f;
    }
    const bool gpu_fits = fitting >= t.gpus;
    if (gpu_fits && cpu_fits) {
      bucket[kLackGpu] += t.weight * static_cast<double>(below);
      bucket[kSatisfied] += t.weight * static_cast<double>(idle_sum - below);
    } else if (!gpu_fits && !cpu_fits) {
      bucket[kLackBoth] += t.weight * idle;
    } else if (!gpu_fits) {
      bucket[kLackGpu] += t.weight * idle;
    } else {
      bucket[kLackCpu] += t.weight * idle;
    }
  }
  return bucket[kLackBoth] + bucket[kLackGpu] + bucket[kLackCpu] + bucket[kXlSatisfied] +
         bucket[kXrLackCpu] + bucket[kNoAccess];
}

}  // namespace hangar::sched
