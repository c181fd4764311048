// Fragmentation measured against a workload, as FGD defines it (Weng et al., ATC'23): the free
// GPU share on a node that the typical tasks of the workload could not use. The workload is a
// weighted list of typical task shapes; the controller builds it from recent jobs, the
// simulator from the trace.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "cluster/topology.h"

namespace hangar::sched {

struct TypicalTask {
  int64_t milli_cpu = 0;
  int32_t milli = 0;  // per GPU; 0 for a CPU-only task
  int32_t gpus = 0;
  cluster::ModelMask models = cluster::kAnyModel;
  std::string models_key;  // the allowed models as written (tie-break when ordering)
  double weight = 0;
};

class WorkloadProfile {
 public:
  WorkloadProfile() = default;
  // Keeps the most frequent shapes until they cover `coverage` of all tasks (the one that
  // crosses it is kept), ordered by count then shape, both descending; weights are each kept
  // shape's share of the kept tasks.
  struct Count {
    TypicalTask task;
    int64_t count = 0;
  };
  static WorkloadProfile FromCounts(std::vector<Count> counts, double coverage = 0.95);

  const std::vector<TypicalTask>& tasks() const { return tasks_; }
  // The shapes left out by `coverage`, weighted by their share of *all* tasks (F(n) never reads
  // them; a policy may, for shapes too rare to be typical but too big to fit just anywhere).
  const std::vector<TypicalTask>& rare_tasks() const { return rare_; }
  // Mean milli-GPU one task asks for, over all tasks (CPU-only ones count as 0).
  double milli_per_task() const { return milli_per_task_; }
  bool empty() const { return tasks_.empty(); }
  uint64_t id() const { return id_; }  // differs between profiles (for caches)

 private:
  std::vector<TypicalTask> tasks_;
  std::vector<TypicalTask> rare_;
  double milli_per_task_ = 0;
  uint64_t id_ = 0;
};

// The state of one node that fragmentation depends on.
struct NodeView {
  int64_t cpu_left = 0;
  bool has_gpus = false;
  cluster::ModelId model = 0;
  std::span<const int32_t> free_milli;  // per GPU, 0 for GPUs that are not available
};

// F(n): expected milli-GPU on the node that a task drawn from the profile could not use. Sums in
// float64 in the profile's order into FGD's seven buckets, then adds them as FGD does, so the
// simulator reproduces the published numbers to the last digit.
double NodeFragmentation(const WorkloadProfile& profile, const NodeView& node);

}  // namespace hangar::sched
