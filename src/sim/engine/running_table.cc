#include "sim/engine/running_table.h"

namespace hangar::sim {

void RunningTable::Reset(size_t jobs) {
  slots_.clear();
  slots_.resize(jobs);
  seen_.clear();
  info_.clear();
  pos_.assign(jobs, SIZE_MAX);
}

Running& RunningTable::Add(std::unique_ptr<Running> run, const sched::RunningJob& seen,
                           const RunningInfo& info) {
  const size_t j = run->job;
  pos_[j] = seen_.size();
  seen_.push_back(seen);
  info_.push_back(info);
  slots_[j] = std::move(run);
  return *slots_[j];
}

std::unique_ptr<Running> RunningTable::Remove(size_t j) {
  const size_t pos = pos_[j];
  seen_[pos] = seen_.back();
  info_[pos] = info_.back();
  pos_[info_[pos].job] = pos;
  seen_.pop_back();
  info_.pop_back();
  pos_[j] = SIZE_MAX;
  return std::move(slots_[j]);
}

}  // namespace hangar::sim
