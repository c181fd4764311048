#include "sim/engine/rank_keeper.h"

#include <unordered_map>

namespace hangar::sim {

void RankKeeper::Start(const JobTable& jobs, std::span<const size_t> arrivals) {
  prev_.assign(jobs.size(), SIZE_MAX);
  next_.assign(jobs.size(), SIZE_MAX);
  cache_.assign(jobs.size(), {});
  reclassed_.clear();
  if (!by_predecessor_) return;
  std::unordered_map<uint64_t, size_t> last;  // per shape, in submission order
  for (size_t j : arrivals) {
    auto [it, fresh] = last.emplace(jobs.spec(j).request->fingerprint, j);
    if (!fresh) {
      prev_[j] = it->second;
      next_[it->second] = j;
      it->second = j;
    }
  }
}

sched::owner::RankClass RankKeeper::ClassOf(const JobTable& jobs, size_t j) const {
  const uint64_t shape = jobs.spec(j).request->fingerprint;
  const size_t p = prev_.empty() ? SIZE_MAX : prev_[j];
  if (p == SIZE_MAX || jobs.result(p).end == kNever) return {shape, 0};
  return sched::owner::ClassByPredecessor(shape, jobs.at(p).ran);
}

int64_t RankKeeper::RankOf(const JobTable& jobs, size_t j, Duration age,
                           sched::owner::CachedRank* cache) {
  if (!cache) cache = &cache_[j];
  if (book_.Holds(*cache, age)) return cache->rank;
  return book_.RankOf(ClassOf(jobs, j), age, jobs.spec(j).request->total_milli_gpu, cache);
}

size_t RankKeeper::Finished(const JobTable& jobs, size_t j) {
  book_.Finished(ClassOf(jobs, j), jobs.at(j).ran);
  const size_t s = next_[j];
  if (s == SIZE_MAX || jobs.result(s).end != kNever) return SIZE_MAX;
  cache_[s].Invalidate();
  return s;
}

bool RankKeeper::NewVersion() {
  if (book_.version() == ranked_version_) return false;
  ranked_version_ = book_.version();
  return true;
}

}  // namespace hangar::sim
