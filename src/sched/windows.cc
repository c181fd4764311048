#include "sched/windows.h"

#include <algorithm>

namespace hangar::sched {

WindowGate::WindowGate(std::span<const NodeWindow> windows, uint32_t num_nodes, Time now)
    : windows_(windows), num_nodes_(num_nodes), now_(now) {
  for (uint32_t i = 0; i < windows.size(); ++i) {
    if (windows[i].end > now) by_start_.push_back(i);
  }
  std::stable_sort(by_start_.begin(), by_start_.end(),
                   [&](uint32_t a, uint32_t b) { return windows[a].start < windows[b].start; });
}

WindowGate::Key WindowGate::KeyOf(const PendingJob& job) const {
  Key k;
  if (by_start_.empty() && job.window < 0) return k;
  k.member = job.window >= 0 && static_cast<size_t>(job.window) < windows_.size() ? job.window : -1;
  k.opportunistic = job.tier == job::Tier::kOpportunistic;
  // Windows open now start at or before now, so they are always within the prefix a job crosses.
  for (uint32_t w : by_start_) {
    if (static_cast<int32_t>(w) == k.member || Passes(k, w)) continue;
    if (job.time_limit > 0 && windows_[w].start >= now_ + job.time_limit) break;
    ++k.crossed;
  }
  return k;
}

std::optional<Reason> WindowGate::NotOpen(const PendingJob& job) const {
  if (job.window < 0) return std::nullopt;
  Reason r;
  r.rule = Rule::kNotNowWindowClosed;
  r.other = UINT64_MAX;  // a window the snapshot lacks: never open
  if (static_cast<size_t>(job.window) >= windows_.size()) return r;
  const NodeWindow& w = windows_[static_cast<size_t>(job.window)];
  if (w.start <= now_ && now_ < w.end) return std::nullopt;
  r.other = static_cast<uint64_t>(job.window);
  r.at = w.start;
  return r;
}

const std::vector<uint8_t>* WindowGate::Mask(const Key& k, const std::vector<uint8_t>* also) {
  if (!Applies(k)) return also;
  auto [it, fresh] = masks_.try_emplace({k, also});
  std::vector<uint8_t>& m = it->second;
  if (!fresh) return &m;
  m.assign(num_nodes_, k.member >= 0 ? 1 : 0);
  if (k.member >= 0) {
    for (uint32_t n : windows_[static_cast<size_t>(k.member)].nodes) m[n] = 0;
  }
  int32_t left = k.crossed;
  for (uint32_t w : by_start_) {
    if (left == 0) break;
    if (static_cast<int32_t>(w) == k.member || Passes(k, w)) continue;
    for (uint32_t n : windows_[w].nodes) m[n] = 1;
    --left;
  }
  if (also) {
    for (uint32_t n = 0; n < num_nodes_ && n < also->size(); ++n) m[n] |= (*also)[n];
  }
  return &m;
}

Reason WindowGate::Blame(const Key& k) const {
  Reason r;
  if (k.member >= 0) {
    r.rule = Rule::kNotNowInsideWindow;
    r.other = static_cast<uint64_t>(k.member);
    r.at = windows_[static_cast<size_t>(k.member)].start;
    return r;
  }
  for (uint32_t w : by_start_) {
    r.rule = Rule::kNotNowWindow;
    r.other = w;
    r.at = windows_[w].start;
    break;
  }
  return r;
}

std::string WindowGate::Detail(const Reason& r) const {
  const bool window_rule = r.rule == Rule::kNotNowWindow || r.rule == Rule::kNotNowWindowClosed ||
                           r.rule == Rule::kNotNowInsideWindow;
  if (!window_rule || r.other >= windows_.size()) return "";
  const NodeWindow& w = windows_[r.other];
  if (w.opportunistic_may_use) {
    return "fits only on the hot spares, which take opportunistic work only (they are kept for "
           "replacing a gang's failed node; docs/goodput.md)";
  }
  const std::string name = "reservation " + w.name;
  const std::string span = FormatUtcTimestamp(w.start) + " to " + FormatUtcTimestamp(w.end);
  switch (r.rule) {
    case Rule::kNotNowWindowClosed:
      return "runs inside " + name + ", which opens at " + FormatUtcTimestamp(w.start);
    case Rule::kNotNowInsideWindow:
      return "runs inside " + name + " (" + span + "), whose nodes have not the room for it now";
    default:
      return w.start <= now_ ? "fits only on nodes held by " + name + " (" + span + ")"
                             : "fits only on nodes held by " + name + " (" + span +
                                   "), and its time limit would cross the window's start (a job "
                                   "without a time limit counts as running for ever)";
  }
}

}  // namespace hangar::sched
