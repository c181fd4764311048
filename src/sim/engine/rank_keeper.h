// With SimConfig::gittins_ranks, the lean engine's owner that learns run times (Simulator; the
// controller's twin is sched/owner/ranks.h used by ClusterState): each job's rank class -- its
// shape or, with gittins_by_predecessor, its shape and how long the job of that shape submitted
// just before it ran (sched::owner::ClassByPredecessor) -- the ranks cached per job, and the
// waiting jobs whose class changed since the pending order was last ranked.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "sched/owner/ranks.h"
#include "sim/engine/job_table.h"

namespace hangar::sim {

class RankKeeper {
 public:
  RankKeeper(const sched::queue::GittinsOptions& options, bool by_predecessor)
      : book_(options), by_predecessor_(by_predecessor) {}
  // Before a run: `arrivals` in submission order (each job linked to its shape's previous one).
  void Start(const JobTable& jobs, std::span<const size_t> arrivals);
  sched::owner::RankClass ClassOf(const JobTable& jobs, size_t j) const;
  // Job `j`'s rank after running `age` in all, cached in `cache` (by default its own).
  int64_t RankOf(const JobTable& jobs, size_t j, Duration age,
                 sched::owner::CachedRank* cache = nullptr);
  const sched::owner::CachedRank& cached(size_t j) const { return cache_[j]; }
  // Job `j` has finished: its class learns its run time. Returns its successor, ranked by
  // another class from now on (its cached rank forgotten), unless it has none or has finished
  // (SIZE_MAX).
  size_t Finished(const JobTable& jobs, size_t j);
  // Waiting job `j` changed class: it moves in the pending order before the next cycle.
  void Reclassed(size_t j) { reclassed_.push_back(j); }
  std::vector<size_t> TakeReclassed() {
    std::vector<size_t> out;
    out.swap(reclassed_);
    return out;
  }
  // Whether a finish made a re-estimate due, and the re-estimate from what runs and has run.
  bool due() const { return book_.due(); }
  void Reestimate(std::span<const sched::queue::GittinsRanker::AliveJob> alive) {
    book_.Reestimate(alive);
  }
  // Whether any rank may have changed since the last call that said so.
  bool NewVersion();

 private:
  sched::owner::RankBook book_;
  bool by_predecessor_;
  std::vector<size_t> prev_, next_;  // by job index: its predecessor and successor (SIZE_MAX: none)
  std::vector<sched::owner::CachedRank> cache_;  // by job index
  std::vector<size_t> reclassed_;
  uint64_t ranked_version_ = 0;  // the version the pending order reflects
};

}  // namespace hangar::sim
