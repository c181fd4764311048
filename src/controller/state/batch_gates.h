// What the batch gates (cluster_state_batch.cc) remember between cycles: each job array's elements
// and its cap on running elements (`array.max_running`, sbatch --array=...%N), how many waiting
// jobs have dependencies (`after:`), and the earliest `begin:` time a waiting job is gated by. The
// facade decides with these whether a waiting job may go to a cycle, and whether a cancel or the
// clock calls for one.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "common/time.h"
#include "sched/snapshot.h"

namespace hangar::controller {

class BatchGates {
 public:
  struct Array {
    std::vector<sched::JobId> elements;  // ascending
    int max_running = 0;                 // 0: no cap
  };

  // Array `id` (its first element's id) with a cap of `max_running`; elements come through Add.
  void NewArray(uint64_t id, int max_running, size_t elements);
  // Element `job` of array `id` (ids ascending), made when the array is not known yet (a restore).
  void Add(uint64_t id, sched::JobId job, int max_running);
  // Null when `id` is not an array.
  const Array* FindArray(uint64_t id) const;
  bool has_arrays() const { return !arrays_.empty(); }
  // Drops the elements `gone` picks from each of `arrays`, and the arrays left empty.
  void ForgetElements(const std::unordered_set<uint64_t>& arrays,
                      const std::function<bool(sched::JobId)>& gone);

  // A cycle's gather starts counting afresh: then each waiting job with dependencies is counted
  // (AddDependent), and each one `begin:` gates (GatedUntil).
  void StartCount();
  // A waiting job has dependencies (one admitted since the last count, too).
  void AddDependent() { ++with_dependencies_; }
  // A waiting job may not start before `begin`.
  void GatedUntil(Time begin);
  // Waiting jobs with `after:`, as of the last count (plus those admitted since): while there are
  // none, cancelling a waiting job cannot change what a cycle decides.
  size_t with_dependencies() const { return with_dependencies_; }
  // Whether the earliest `begin:` of a gated job has come at `now` (once: it is forgotten then).
  bool BeginCame(Time now);

 private:
  std::unordered_map<uint64_t, Array> arrays_;
  size_t with_dependencies_ = 0;
  Time next_begin_ = 0;  // 0: no job gated by its begin time
};

}  // namespace hangar::controller
