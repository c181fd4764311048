#include "sim/engine/accounts.h"

#include <algorithm>

#include "sched/owner/share_history.h"

namespace hangar::sim {

Accounts::Accounts(const sched::queue::QueueTree* tree, Duration half_life)
    : tree_(tree), half_life_(half_life) {}

void Accounts::Reset(Time first) {
  last_ = first;
  allocated_milli_ = busy_gpu_ms_ = cycles_ = 0;
  if (!tree_) return;
  usage_.assign(tree_->nodes().size(), std::vector<int64_t>(tree_->dims(), 0));
  history_.assign(tree_->nodes().size(), std::vector<double>(tree_->dims(), 0.0));
  queue_gpu_ms_.assign(tree_->nodes().size(), 0);
}

void Accounts::Advance(Time now) {
  if (now > last_) {
    const Duration dt = now - last_;
    busy_gpu_ms_ += allocated_milli_ * dt / 1000;
    if (tree_) {
      for (size_t q = 0; q < usage_.size(); ++q)
        queue_gpu_ms_[q] += usage_[q][sched::queue::kGpu] * dt / 1000;
      if (half_life_ > 0) sched::owner::DecayShareHistory(history_, usage_, dt, half_life_);
    }
  }
  last_ = std::max(last_, now);
}

void Accounts::Charge(uint32_t leaf, const std::vector<int64_t>& charge, Charging how) {
  const int sign = static_cast<int>(how);
  const auto& nodes = tree_->nodes();
  for (int q = static_cast<int>(leaf); q >= 0; q = nodes[q].parent) {
    for (size_t d = 0; d < charge.size(); ++d) usage_[q][d] += sign * charge[d];
  }
}

}  // namespace hangar::sim
