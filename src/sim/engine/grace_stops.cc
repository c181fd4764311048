#include "sim/engine/grace_stops.h"

namespace hangar::sim {

void GraceStops::Clear() {
  stops_ = {};
  stopping_.clear();
  stopping_for_.clear();
  awaiting_.clear();
  also_waiting_.clear();
}

void GraceStops::Begin(size_t j, std::unique_ptr<Running> held, Time until, uint64_t epoch) {
  stops_.push({until, j, epoch});
  stopping_[j] = std::move(held);
}

size_t GraceStops::PopDue(Time now) {
  if (stops_.empty() || stops_.top().end > now) return SIZE_MAX;
  const size_t j = stops_.top().job;
  stops_.pop();
  return j;
}

void GraceStops::Await(size_t j, int victims) {
  if (victims > 0) awaiting_[j] = victims;
}

size_t GraceStops::ForJob(size_t v) const {
  auto f = stopping_for_.find(v);
  return f == stopping_for_.end() ? SIZE_MAX : f->second;
}

std::unique_ptr<Running> GraceStops::Stop(size_t v, std::vector<size_t>* settled) {
  auto it = stopping_.find(v);
  if (it == stopping_.end()) return nullptr;
  std::unique_ptr<Running> held = std::move(it->second);
  stopping_.erase(it);
  std::vector<size_t> waited;  // the jobs that waited for it
  if (auto f = stopping_for_.find(v); f != stopping_for_.end()) {
    waited.push_back(f->second);
    stopping_for_.erase(f);
  }
  if (auto w = also_waiting_.find(v); w != also_waiting_.end()) {
    waited.insert(waited.end(), w->second.begin(), w->second.end());
    also_waiting_.erase(w);
  }
  for (size_t k : waited) {
    auto a = awaiting_.find(k);
    if (a == awaiting_.end() || --a->second > 0) continue;
    awaiting_.erase(a);
    settled->push_back(k);
  }
  return held;
}

}  // namespace hangar::sim
