// JobLearning: the controller's side of what the scheduler reads about jobs' histories
// (sched/owner/), as the simulator keeps it: what each job received in its ended attempts (for
// least-attained-service), Gittins ranks learned from the run times of finished jobs, and the
// workload profile learned from what was submitted.
//
// A job's Gittins class is its shape; with `by predecessor`, once the job of its shape submitted
// just before it has finished, its shape and how long that one ran (to within an octave), falling
// back to the shape -- as the simulator classes jobs.
//
// Not thread-safe: the state thread owns it (ClusterState holds it).
#pragma once

#include <functional>
#include <unordered_map>
#include <vector>

#include "controller/state/attempt_usage.h"
#include "sched/owner/ranks.h"
#include "sched/owner/workload.h"
#include "sched/request.h"

namespace hangar::controller {

class JobLearning {
 public:
  // What one job received in its ended attempts, and its rank cached.
  struct Service {
    int64_t attained_gpu_ms = 0;  // in ended attempts
    Duration ran = 0;             // run time of ended attempts
    sched::owner::CachedRank rank;
    uint64_t rank_class = 0;  // the class `rank` was computed for
  };

  // The jobs submitted since the last call are `id`s above submitted_upto(), given in id order,
  // each once (`request` null: a job without one, skipped): counted in the workload profile and,
  // with `link`, linked to the job of the same shape submitted before it.
  sched::JobId submitted_upto() const { return submitted_upto_; }
  void Submitted(sched::JobId id, const sched::GangRequest* request, bool link);
  // Folds the attempts of `log` that ended since the last call: their service is summed; a job
  // that succeeded or failed teaches its class its run time (with `ranked`; `request_of` gives a
  // job's request, null when it is gone). A finished job's service is forgotten.
  void Ended(const std::vector<AttemptUsage>& log, bool ranked, bool by_predecessor,
             const std::function<const sched::GangRequest*(sched::JobId)>& request_of);
  // Jobs cancelled before they ever ran leave no usage row: once the maps hold more than four
  // times the `live` jobs (plus 256), those for which `ended` holds are forgotten.
  void Sweep(size_t live, const std::function<bool(sched::JobId)>& ended);

  sched::owner::RankClass ClassOf(sched::JobId id, const sched::GangRequest& request) const;
  // The rank of job `id` at `age`, cached in `s` (its Service) until its class changes.
  int64_t RankOf(sched::JobId id, const sched::GangRequest& request, Duration age,
                 Service* s) const;

  Service* Find(sched::JobId id);
  Service& Of(sched::JobId id) { return service_[id]; }
  const std::unordered_map<sched::JobId, Service>& services() const { return service_; }
  sched::owner::RankBook& ranks() { return ranks_; }
  sched::owner::WorkloadLearner& workload() { return workload_; }

 private:
  std::unordered_map<uint64_t, sched::JobId> last_of_shape_;    // by request fingerprint
  std::unordered_map<sched::JobId, sched::JobId> predecessor_;  // of jobs not yet ended
  std::unordered_map<sched::JobId, Duration> finished_ran_;     // of finished predecessors
  std::unordered_map<sched::JobId, Service> service_;
  size_t usage_seen_ = 0;            // log rows folded into service_
  sched::JobId submitted_upto_ = 0;  // jobs (by id) counted in workload_
  sched::owner::RankBook ranks_;
  sched::owner::WorkloadLearner workload_;
};

}  // namespace hangar::controller
