// The lean engine's running jobs (Simulator): each job's run, what the scheduler sees of it, and
// what a cycle updates on it, kept side by side so a cycle reads them in order.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "cluster/usage.h"
#include "sched/owner/ranks.h"
#include "sched/snapshot.h"

namespace hangar::sim {

// One run of a job: where, since when, and until when.
struct Running {
  size_t job = 0;
  Time start = 0;
  Time ready = 0;  // when its objects are on all its nodes (start, without staging)
  Time end = 0;
  cluster::GangAssignment assignment;
  int64_t milli = 0;
  std::vector<int64_t> charge;  // to its queue, with queues
};

// What a cycle updates on each running job, beside the RunningJob the scheduler sees.
struct RunningInfo {
  size_t job = 0;
  int64_t milli = 0;
  int64_t attained = 0;  // GPU-ms before this run
  Duration ran = 0;      // run time before this run
  sched::owner::CachedRank rank;
};

// An end due at `end` for run `epoch` of `job` (stale once the job's epoch moved on).
struct Completion {
  Time end;
  size_t job;
  uint64_t epoch;
  bool operator>(const Completion& o) const { return end != o.end ? end > o.end : job > o.job; }
};

class RunningTable {
 public:
  // Forgets every run; jobs are indices below `jobs`.
  void Reset(size_t jobs);
  // Job `run->job` starts: its run (held by pointer, so `seen.assignment` and `seen.charge` may
  // point into it), what the scheduler sees and what a cycle updates.
  Running& Add(std::unique_ptr<Running> run, const sched::RunningJob& seen,
               const RunningInfo& info);
  // Job `j` stops running: its run. The last entry takes its place.
  std::unique_ptr<Running> Remove(size_t j);
  // Job `j`'s run; null when it does not run.
  Running* Find(size_t j) const { return j < slots_.size() ? slots_[j].get() : nullptr; }
  // What the scheduler sees and what a cycle updates, position by position.
  std::vector<sched::RunningJob>& seen() { return seen_; }
  const std::vector<sched::RunningJob>& seen() const { return seen_; }
  std::vector<RunningInfo>& info() { return info_; }
  const std::vector<RunningInfo>& info() const { return info_; }
  // Job `j`'s position in seen() and info(); SIZE_MAX when it does not run.
  size_t PositionOf(size_t j) const { return pos_[j]; }

 private:
  std::vector<std::unique_ptr<Running>> slots_;  // by job index; null when not running
  std::vector<sched::RunningJob> seen_;
  std::vector<RunningInfo> info_;
  std::vector<size_t> pos_;  // job index -> position in seen_ and info_
};

}  // namespace hangar::sim
