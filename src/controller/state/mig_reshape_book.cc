#include "controller/state/mig_reshape_book.h"

#include <iterator>

namespace hangar::controller {

uint64_t MigReshapeBook::Begin(uint32_t gpu, uint64_t for_job, Time now) {
  const uint64_t id = next_id_++;
  in_flight_[id] = {gpu, now, for_job};
  return id;
}

const MigReshapeBook::InFlight* MigReshapeBook::Find(uint64_t id) const {
  auto it = in_flight_.find(id);
  return it == in_flight_.end() ? nullptr : &it->second;
}

void MigReshapeBook::Finish(uint64_t id, bool ok, Time now) {
  auto it = in_flight_.find(id);
  if (it == in_flight_.end()) return;
  stats_.seconds_sum += double(now - it->second.sent) / kSecond;
  ++(ok ? stats_.done : stats_.failed);
  in_flight_.erase(it);
}

void MigReshapeBook::ForgetGpu(uint32_t gpu) {
  for (auto it = in_flight_.begin(); it != in_flight_.end();)
    it = it->second.gpu == gpu ? in_flight_.erase(it) : std::next(it);
}

MigReshapeBook::Stats MigReshapeBook::stats() const {
  Stats s = stats_;
  s.in_flight = static_cast<int64_t>(in_flight_.size());
  return s;
}

}  // namespace hangar::controller
