#include "sched/owner/planned_starts.h"

#include <algorithm>

namespace hangar::sched::owner {

void PlannedStarts::Plan(Key key, Placement p) { planned_[key] = {std::move(p), next_order_++}; }

void PlannedStarts::Hold(Key key, cluster::GangAssignment share) {
  held_[key].push_back(std::move(share));
}

void PlannedStarts::HoldWhatIsFree(Key key, cluster::ClusterUsage& usage,
                                   const cluster::GangAssignment& a) {
  for (auto& share : cluster::HoldWhatIsFree(usage, a)) Hold(key, std::move(share));
}

void PlannedStarts::GiveBack(Key key, cluster::ClusterUsage& usage) {
  auto h = held_.find(key);
  if (h == held_.end()) return;
  for (const auto& share : h->second) usage.Release(share);
  held_.erase(h);
}

void PlannedStarts::StartDue(cluster::ClusterUsage& usage, const std::function<Due(Key)>& due,
                             const std::function<void(Key, Placement&)>& start) {
  if (planned_.empty()) return;
  std::vector<std::pair<uint64_t, Key>> order;
  order.reserve(planned_.size());
  for (const auto& [key, plan] : planned_) order.emplace_back(plan.order, key);
  std::sort(order.begin(), order.end());
  for (const auto& [ord, key] : order) {
    auto it = planned_.find(key);
    if (it == planned_.end() || it->second.order != ord) continue;  // replaced by `start`
    switch (due(key)) {
      case Due::kWait:
        continue;
      case Due::kDrop:
        planned_.erase(it);
        continue;
      case Due::kStart:
        break;
    }
    Placement p = std::move(it->second.placement);
    planned_.erase(it);
    GiveBack(key, usage);
    start(key, p);
  }
}

void PlannedStarts::ReleaseHolds(cluster::ClusterUsage& usage,
                                 const std::function<bool(Key)>& waiting) {
  for (auto it = held_.begin(); it != held_.end();) {
    if (waiting(it->first)) {
      ++it;
      continue;
    }
    for (const auto& share : it->second) usage.Release(share);
    it = held_.erase(it);
  }
}

void PlannedStarts::Forget(Key key, cluster::ClusterUsage& usage) {
  planned_.erase(key);
  GiveBack(key, usage);
}

}  // namespace hangar::sched::owner
