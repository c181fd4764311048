#include "controller/state/batch_gates.h"

#include <algorithm>
#include <iterator>
#include <utility>

namespace hangar::controller {

void BatchGates::NewArray(uint64_t id, int max_running, size_t elements) {
  Array& a = arrays_[id];
  a.max_running = max_running;
  a.elements.reserve(elements);
}

void BatchGates::Add(uint64_t id, sched::JobId job, int max_running) {
  Array& a = arrays_[id];
  a.elements.push_back(job);
  a.max_running = max_running;
}

const BatchGates::Array* BatchGates::FindArray(uint64_t id) const {
  auto it = arrays_.find(id);
  return it == arrays_.end() ? nullptr : &it->second;
}

void BatchGates::ForgetElements(const std::unordered_set<uint64_t>& arrays,
                                const std::function<bool(sched::JobId)>& gone) {
  for (uint64_t array : arrays) {  // each array's list once, however many of its jobs go
    auto a = arrays_.find(array);
    if (a == arrays_.end()) continue;
    std::vector<sched::JobId> kept;
    std::copy_if(a->second.elements.begin(), a->second.elements.end(), std::back_inserter(kept),
                 [&](sched::JobId id) { return !gone(id); });
    if (kept.empty())
      arrays_.erase(a);
    else
      a->second.elements = std::move(kept);
  }
}

void BatchGates::StartCount() {
  with_dependencies_ = 0;
  next_begin_ = 0;
}

void BatchGates::GatedUntil(Time begin) {
  next_begin_ = next_begin_ == 0 ? begin : std::min(next_begin_, begin);
}

bool BatchGates::BeginCame(Time now) {
  if (next_begin_ == 0 || now < next_begin_) return false;
  next_begin_ = 0;
  return true;
}

}  // namespace hangar::controller
