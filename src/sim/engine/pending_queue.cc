#include "sim/engine/pending_queue.h"

#include <algorithm>

namespace hangar::sim {

void PendingQueue::Clear() {
  jobs_.clear();
  keys_.clear();
  cpu_only_ = 0;
}

void PendingQueue::Insert(const sched::PendingJob& p) {
  const sched::queue::OrderKey key = policy_.Key(p);
  const auto at = std::upper_bound(keys_.begin(), keys_.end(), key);
  const ptrdiff_t pos = at - keys_.begin();
  keys_.insert(at, key);
  jobs_.insert(jobs_.begin() + pos, p);
}

size_t PendingQueue::Find(sched::JobId id) const {
  size_t pos = 0;
  while (pos < jobs_.size() && jobs_[pos].id != id) ++pos;
  return pos;
}

void PendingQueue::Erase(size_t pos) {
  jobs_.erase(jobs_.begin() + static_cast<ptrdiff_t>(pos));
  keys_.erase(keys_.begin() + static_cast<ptrdiff_t>(pos));
}

void PendingQueue::EraseAll(std::span<const size_t> positions) {
  if (positions.empty()) return;
  std::vector<uint8_t> gone(jobs_.size(), 0);
  size_t w = jobs_.size();  // the first position that goes: the ones before it stay put
  for (size_t pos : positions) {
    gone[pos] = 1;
    w = std::min(w, pos);
  }
  for (size_t r = w; r < jobs_.size(); ++r) {
    if (gone[r]) continue;
    jobs_[w] = jobs_[r];
    keys_[w] = keys_[r];
    ++w;
  }
  jobs_.resize(w);
  keys_.resize(w);
}

void PendingQueue::Rekey(size_t pos) {
  const sched::PendingJob p = jobs_[pos];
  Erase(pos);
  Insert(p);
}

void PendingQueue::RekeyAll(const std::function<void(sched::PendingJob&)>& update) {
  std::vector<std::pair<sched::queue::OrderKey, sched::PendingJob>> keyed;
  keyed.reserve(jobs_.size());
  for (sched::PendingJob& p : jobs_) {
    update(p);
    keyed.emplace_back(policy_.Key(p), p);
  }
  std::sort(keyed.begin(), keyed.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  for (size_t i = 0; i < keyed.size(); ++i) {
    keys_[i] = keyed[i].first;
    jobs_[i] = keyed[i].second;
  }
}

}  // namespace hangar::sim
