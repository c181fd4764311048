// The lean engine's victims under a preemption grace (Simulator, SimConfig::preemption_grace):
// each victim keeps its GPUs until it stops, and the jobs placed on them -- its preemptor, and any
// other job the same cycle placed on GPUs it holds -- wait until every victim they wait for has
// stopped, as in the controller.
#pragma once

#include <cstdint>
#include <memory>
#include <queue>
#include <unordered_map>
#include <vector>

#include "sim/engine/running_table.h"

namespace hangar::sim {

class GraceStops {
 public:
  void Clear();
  // Victim `j` stops at `until`, holding `held` meanwhile.
  void Begin(size_t j, std::unique_ptr<Running> held, Time until, uint64_t epoch);
  // The earliest stop due; kNever when none.
  Time NextStop() const { return stops_.empty() ? kNever : stops_.top().end; }
  // The next victim whose stop is due by `now` (each once); SIZE_MAX when none.
  size_t PopDue(Time now);
  bool Stopping(size_t j) const { return stopping_.count(j) > 0; }
  // The victims still stopping and what each holds (in the map's order).
  const std::unordered_map<size_t, std::unique_ptr<Running>>& stopping() const { return stopping_; }
  // Job `j` waits for `victims` victims to stop (0: it waits for none).
  void Await(size_t j, int victims);
  bool Awaits(size_t j) const { return awaiting_.count(j) > 0; }
  void StopAwaiting(size_t j) { awaiting_.erase(j); }
  // Victim `v` was preempted for job `j` (the first such job counts).
  void PreemptedFor(size_t v, size_t j) { stopping_for_.try_emplace(v, j); }
  // Job `j` was placed on GPUs victim `v` still holds.
  void AlsoWaitsFor(size_t v, size_t j) { also_waiting_[v].push_back(j); }
  // The job victim `v` was preempted for; SIZE_MAX when none.
  size_t ForJob(size_t v) const;
  // Victim `v` has stopped: what it held (null when it was not stopping). `settled` gets the jobs
  // that now wait for no victim.
  std::unique_ptr<Running> Stop(size_t v, std::vector<size_t>* settled);

 private:
  std::priority_queue<Completion, std::vector<Completion>, std::greater<>> stops_;
  std::unordered_map<size_t, std::unique_ptr<Running>> stopping_;
  std::unordered_map<size_t, size_t> stopping_for_;  // victim -> the job it was preempted for
  std::unordered_map<size_t, int> awaiting_;         // job -> victims still stopping
  // victim -> jobs placed on GPUs it holds in the cycle that preempted it (besides its preemptor)
  std::unordered_map<size_t, std::vector<size_t>> also_waiting_;
};

}  // namespace hangar::sim
