// Gittins ranks from run-time distributions learned online.
//
// Without knowing how long a job will run, the order that minimises mean completion time is the
// Gittins index (Gittins; Aalto, Ayesta and Righter; Scully and Harchol-Balter): given how long a
// job has already run (its age), pick the stopping point that completes it most cheaply, and rank
// the job by the expected run time per completion at that point. A class of jobs whose run times
// are heavy-tailed gets least-attained-service (young jobs first); one whose run times cluster
// gets run-to-completion once a job is old enough to be near its end, instead of being starved by
// ever younger jobs as under LAS. The rank here is per job, in GPU-milliseconds: the expected run
// time per completion times the job's GPUs, so a wide job pays for the capacity it holds (Smith's
// rule); lower goes first.
//
// The queue's owner (the simulator; the controller) reports finished run times and hands the
// scheduler the ranks in the Snapshot: the scheduler itself learns nothing. Deterministic; not
// thread-safe.
#pragma once

#include <cstdint>
#include <map>
#include <span>
#include <vector>

#include "common/time.h"

namespace hangar::sched::queue {

// The run-time distribution of one class of jobs. Finished run times are kept in log-spaced bins
// (8 per octave from 1 s); Reestimate turns them into a Kaplan-Meier estimate that also counts the
// jobs still alive, without which the estimate leans short (the long jobs of a class are the last
// to finish).
class RuntimeDistribution {
 public:
  void AddFinished(Duration run_time);
  // Re-estimates from the finished jobs and `alive`: the ages of this class's jobs that have run
  // but not finished, each known to run at least that long.
  void Reestimate(std::span<const Duration> alive);
  int64_t finished() const { return finished_; }
  // finished() at the last Reestimate; the estimate is empty until the first.
  int64_t estimated_from() const { return estimated_from_; }
  // The Gittins rank per GPU of a job of this class that has run `age`: the least expected run
  // time per completion over stopping points. -1 when no finished job outlived `age`.
  Duration RankPerGpu(Duration age) const;
  Duration RankPerGpuInBin(size_t bin) const;  // the same for every age in `bin`

  // The bins: 0 holds [0, 1 s), k >= 1 holds [2^((k-1)/8), 2^(k/8)) s. A rank is constant within
  // a bin of age (it is computed at the bin's start).
  static size_t BinOf(Duration t);
  static Duration BinStart(size_t bin);

 private:
  struct Atom {
    Duration value;  // the mean finished run time in a bin
    double mass;     // its Kaplan-Meier probability
  };
  Duration ComputeRank(Duration age) const;

  std::vector<int64_t> count_;  // finished jobs per bin
  std::vector<Duration> sum_;   // their run times, summed
  int64_t finished_ = 0;
  int64_t estimated_from_ = 0;
  std::vector<Atom> atoms_;             // non-empty bins, in order
  double tail_mass_ = 0;                // the probability of outliving every finished job
  mutable std::vector<Duration> memo_;  // rank per bin of age; kUnknown until first asked
};

struct GittinsOptions {
  // A class with fewer finished jobs than this is ranked by the pooled distribution of all
  // classes; so is a job older than every finished job of its class.
  int min_class_samples = 8;
  // A class is re-estimated once it has this many percent more finished jobs than at its last
  // estimate (and at least one more): O(log n) estimates per class, and ranks that hold still
  // between them.
  int reestimate_growth_pct = 5;
};

class GittinsRanker {
 public:
  struct AliveJob {
    uint64_t job_class = 0;
    Duration age = 0;           // run time so far
    uint64_t parent_class = 0;  // 0: none
  };

  explicit GittinsRanker(GittinsOptions options = {}) : options_(options) {}

  // A job of `job_class` finished after running `run_time` in all. Returns true when an estimate
  // is due: the owner should then call Reestimate.
  // With a parent_class (not 0), the run time counts for that coarser class too.
  [[nodiscard]] bool Finished(uint64_t job_class, Duration run_time, uint64_t parent_class = 0);
  // Re-estimates the classes that are due; `alive` lists every job that has run and not finished.
  void Reestimate(std::span<const AliveJob> alive);
  // The rank, in GPU-milliseconds, of a job of `job_class` that has run `age` on `milli_gpu`.
  // With nothing learned that covers `age`, the expected remainder is taken to be the age itself,
  // which orders like least attained service.
  int64_t Rank(uint64_t job_class, Duration age, int64_t milli_gpu,
               uint64_t parent_class = 0) const;
  // Rank, and the age up to which it holds (NextStep), in one look-up.
  struct Step {
    int64_t rank = 0;
    Duration until_age = 0;
  };
  // A class with too few finished jobs borrows its parent's estimate (when parent_class is not
  // 0), then the pooled one.
  Step RankAt(uint64_t job_class, Duration age, int64_t milli_gpu, uint64_t parent_class = 0) const;
  // Ranks are steps in age: Rank(c, a, m) == Rank(c, b, m) for a <= b < NextStep(a) as long as
  // version() holds, so an owner may cache a rank until then.
  static Duration NextStep(Duration age);
  // Changes whenever Reestimate may have changed a rank.
  uint64_t version() const { return version_; }

 private:
  bool Due(const RuntimeDistribution& d) const;

  GittinsOptions options_;
  RuntimeDistribution pooled_;
  std::map<uint64_t, RuntimeDistribution> classes_;
  uint64_t version_ = 0;
};

}  // namespace hangar::sched::queue
