// The lean engine's jobs (Simulator): each job as added, its result so far, and where it stands --
// run time left, service received, its current run's epoch, its place in submission order --
// found by index (the order added) or by id.
#pragma once

#include <cstdint>
#include <unordered_map>
#include <vector>

#include "sim/engine/engine.h"

namespace hangar::sim {

struct JobProgress {
  Duration remaining = 0;  // run time left (plus restore costs)
  int64_t attained = 0;    // GPU-ms received so far
  Duration ran = 0;        // run time so far (restores included), ended runs
  uint64_t epoch = 0;      // bumped when a run ends early: a completion of another epoch is stale
  uint64_t order = 0;      // its place in submission order, from 1 (0: not submitted)
  sched::Rule last_rule = sched::Rule::kNone;  // the last reason reported to the observer
  bool held_back = false;  // SimControl::Submit, Withdraw: held back rather than arrived
  uint32_t artifact_set = UINT32_MAX;  // with staging: its interned object set (UINT32_MAX: none)
  // With queues: what it is charged unplaced (computed on its first arrival; the cycle reads it
  // through PendingJob::charge).
  std::vector<int64_t> ask_charge;
};

class JobTable {
 public:
  void Add(SimJob job) { specs_.push_back(std::move(job)); }
  // Before a run: every job's result and progress from the start (run time left: all of it);
  // refuses a job without a request, two jobs of one id, and with `tree` a job of no leaf queue.
  Status Start(const sched::queue::QueueTree* tree);
  size_t size() const { return specs_.size(); }
  SimJob& spec(size_t j) { return specs_[j]; }
  const SimJob& spec(size_t j) const { return specs_[j]; }
  SimJobResult& result(size_t j) { return results_[j]; }
  const SimJobResult& result(size_t j) const { return results_[j]; }
  JobProgress& at(size_t j) { return progress_[j]; }
  const JobProgress& at(size_t j) const { return progress_[j]; }
  // The index of job `id`; SIZE_MAX when there is none.
  size_t IndexOf(sched::JobId id) const {
    auto it = index_of_.find(id);
    return it == index_of_.end() ? SIZE_MAX : it->second;
  }
  // The order a job submitted now takes: after every job submitted so far.
  uint64_t NextOrder() const;
  const std::vector<SimJob>& specs() const { return specs_; }
  const std::vector<SimJobResult>& results() const { return results_; }

 private:
  std::vector<SimJob> specs_;
  std::vector<SimJobResult> results_;
  std::vector<JobProgress> progress_;
  std::unordered_map<sched::JobId, size_t> index_of_;
};

}  // namespace hangar::sim
