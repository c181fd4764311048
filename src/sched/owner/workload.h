// The workload profile a queue's owner learns from what is submitted: the typical task shapes
// that fragmentation-aware scorers (fgd, hangar) measure nodes against. The simulator of openb
// knows the whole trace up front; a running cluster only knows what has arrived, so the profile
// is rebuilt as the mix grows -- not on every job, since scorers cache by the profile's id.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <tuple>

#include "sched/placement/fragmentation.h"
#include "sched/request.h"

namespace hangar::sched::owner {

class WorkloadLearner {
 public:
  // Counts every task (replica) of `req`.
  void Add(const GangRequest& req);
  // The profile of what was added; null until anything was. Rebuilt once the task count has
  // grown by a tenth since the last build (so O(log n) rebuilds), or a new shape appeared
  // among the first few hundred tasks.
  const WorkloadProfile* profile();
  int64_t tasks() const { return total_; }

 private:
  // (cpu, milli, gpus, models): one typical shape.
  using Key = std::tuple<int64_t, int32_t, int32_t, cluster::ModelMask>;
  std::map<Key, int64_t> counts_;
  int64_t total_ = 0;
  int64_t built_at_ = 0;  // total_ at the last build
  bool new_shape_ = false;
  std::unique_ptr<WorkloadProfile> profile_;
};

}  // namespace hangar::sched::owner
