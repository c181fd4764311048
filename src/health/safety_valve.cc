#include "health/safety_valve.h"

#include <algorithm>

namespace hangar::health {

SafetyValve::SafetyValve(SafetyValveOptions options, int total_nodes)
    : options_(options), total_nodes_(total_nodes) {}

void SafetyValve::Prune(Time now) {
  while (!cordons_.empty() && cordons_.front().first <= now - options_.window) {
    cordons_.pop_front();
  }
}

bool SafetyValve::Admit(uint32_t node, Time now) {
  Prune(now);
  bool recent = std::any_of(cordons_.begin(), cordons_.end(),
                            [&](const auto& c) { return c.second == node; });
  if (recent) return true;
  if (tripped_) return false;
  cordons_.emplace_back(now, node);
  int count = static_cast<int>(cordons_.size());
  if (count >= options_.min_cordons &&
      int64_t{count} * 100 >= int64_t{options_.percent} * total_nodes_) {
    tripped_ = true;
    tripped_at_ = now;
    count_at_trip_ = count;
  }
  return true;
}

void SafetyValve::Reset() {
  tripped_ = false;
  tripped_at_ = -1;
  count_at_trip_ = 0;
  cordons_.clear();
}

int SafetyValve::RecentCordons(Time now) const {
  return static_cast<int>(std::count_if(cordons_.begin(), cordons_.end(), [&](const auto& c) {
    return c.first > now - options_.window;
  }));
}

std::string SafetyValve::HeldReason(std::string_view node_name, Time now) const {
  return "safety valve: " + std::to_string(count_at_trip_) + " of " + std::to_string(total_nodes_) +
         " nodes cordoned within " + FormatDuration(options_.window) + " (limit " +
         std::to_string(options_.percent) + "%), tripped at " + FormatUtcTimestamp(tripped_at_) +
         "; not draining " + std::string(node_name) + " (" + std::to_string(RecentCordons(now)) +
         " still within the window); check the rule, then reset the valve";
}

}  // namespace hangar::health
