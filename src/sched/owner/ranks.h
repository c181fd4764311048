// Gittins ranks kept by a queue's owner (the controller, the simulator): what finished jobs
// taught, and each job's rank cached until its age reaches the next rank step or an estimate
// changes. The scheduler only reads PendingJob::rank and RunningJob::rank; this is the one
// place that computes them, so both owners rank the same jobs alike.
#pragma once

#include <algorithm>
#include <bit>
#include <cstdint>
#include <span>

#include "common/time.h"
#include "sched/queue/gittins.h"

namespace hangar::sched::owner {

// The class a job is ranked by, and the coarser one it falls back to (0: none).
struct RankClass {
  uint64_t job_class = 0, parent = 0;
};

// The class of a job of `shape` (its request's fingerprint) whose predecessor of the same shape
// ran `predecessor_ran` in all: the shape refined by the octave of that run time, falling back to
// the shape. Without a finished predecessor (predecessor_ran < 0): the shape alone.
inline RankClass ClassByPredecessor(uint64_t shape, Duration predecessor_ran) {
  if (predecessor_ran < 0) return {shape, 0};
  const int octave =
      std::bit_width(static_cast<uint64_t>(std::max<Duration>(predecessor_ran / kSecond, 1)));
  return {shape * 0x9E3779B97F4A7C15ull + static_cast<uint64_t>(octave) + 1, shape};
}

// One job's rank, valid for ages below until_age while the book's version holds.
struct CachedRank {
  int64_t rank = 0;
  Duration until_age = -1;
  uint64_t version = ~uint64_t{0};
  void Invalidate() { version = ~uint64_t{0}; }
};

class RankBook {
 public:
  explicit RankBook(queue::GittinsOptions options = {}) : ranker_(options) {}

  // A job of class `c` finished after running `ran` in all (every attempt).
  void Finished(RankClass c, Duration ran) {
    if (ranker_.Finished(c.job_class, ran, c.parent)) due_ = true;
  }
  // Whether a finish made a re-estimate due; then call Reestimate before the next cycle.
  bool due() const { return due_; }
  // `alive`: every job that has run and not finished (the evidence that run times are long).
  void Reestimate(std::span<const queue::GittinsRanker::AliveJob> alive) {
    due_ = false;
    ranker_.Reestimate(alive);
  }
  // The rank of a job of class `c` that has run `age` in all on `milli_gpu`.
  int64_t RankOf(RankClass c, Duration age, int64_t milli_gpu, CachedRank* cache) const {
    CachedRank& k = *cache;
    if (!Holds(k, age)) {
      const auto step = ranker_.RankAt(c.job_class, age, milli_gpu, c.parent);
      k.rank = step.rank;
      k.until_age = step.until_age;
      k.version = ranker_.version();
    }
    return k.rank;
  }
  // Whether `cache` still gives the rank at `age` (then the class need not be looked up).
  bool Holds(const CachedRank& cache, Duration age) const {
    return cache.version == ranker_.version() && age < cache.until_age;
  }
  // Changes whenever a rank may have changed.
  uint64_t version() const { return ranker_.version(); }

 private:
  queue::GittinsRanker ranker_;
  bool due_ = false;
};

// Attained service in GPU-milliseconds: what earlier runs received, plus the current run on
// `milli_gpu` from `start` to `now` (none while not running: start == now).
inline int64_t AttainedService(int64_t earlier_gpu_ms, int64_t milli_gpu, Time start, Time now) {
  return earlier_gpu_ms + milli_gpu * std::max<Time>(0, now - start) / 1000;
}

// The seed of the cycle at `now` (Snapshot::random_seed): from the owner's base seed and the
// instant alone, so the same jobs at the same times draw the same numbers in any owner, and a
// restarted controller draws what it would have drawn.
inline uint64_t CycleSeed(uint64_t base, Time now) {
  return base * 0x9E3779B97F4A7C15ull + static_cast<uint64_t>(now);
}

}  // namespace hangar::sched::owner
