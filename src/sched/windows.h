// WindowGate: what the snapshot's reservation windows (NodeWindow) forbid one pending job in one
// cycle, as the nodes it may not use now. A job outside a window may not use its nodes while it
// is open, nor before it when its time limit would cross its start (no time limit: for ever); a
// job inside one may use its nodes only, and only while it is open. Built by Scheduler::Run for
// one cycle; with no window it costs nothing.
#pragma once

#include <compare>
#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "sched/reason.h"
#include "sched/snapshot.h"

namespace hangar::sched {

class WindowGate {
 public:
  WindowGate(std::span<const NodeWindow> windows, uint32_t num_nodes, Time now);

  // Which nodes a job is kept off: the window it runs inside (-1: none) and how many of the other
  // windows, in order of start, it may not cross. Jobs of equal keys get equal masks.
  struct Key {
    int32_t member = -1;
    int32_t crossed = 0;
    bool opportunistic = false;  // passes over windows opportunistic jobs may use (the spares)
    auto operator<=>(const Key&) const = default;
  };
  Key KeyOf(const PendingJob& job) const;
  // Whether a job of this key is kept off any node.
  bool Applies(const Key& k) const { return k.member >= 0 || k.crossed > 0; }
  // Why a job inside a window that is not open now waits; nullopt when it may be placed.
  std::optional<Reason> NotOpen(const PendingJob& job) const;
  // The nodes a job of key `k` may not use, joined with `also` (EASY's reserved nodes; may be
  // null): `also` itself when no window applies. The vector lives as long as the gate; `also`
  // must not change between calls.
  const std::vector<uint8_t>* Mask(const Key& k, const std::vector<uint8_t>* also);
  // The reason for a job of key `k` that the window's nodes kept out: the first window it may not
  // cross, or (inside one) its own.
  Reason Blame(const Key& k) const;
  // The named sentence for a window reason ("" for any other): the cycle's Verdict::detail.
  std::string Detail(const Reason& r) const;

 private:
  // Whether a job of key `k` may use window `w`'s nodes anyway (an opportunistic job, the spares).
  bool Passes(const Key& k, uint32_t w) const {
    return k.opportunistic && windows_[w].opportunistic_may_use;
  }
  std::span<const NodeWindow> windows_;
  uint32_t num_nodes_;
  Time now_;
  std::vector<uint32_t> by_start_;  // windows not ended by now, by start (then index)
  std::map<std::pair<Key, const std::vector<uint8_t>*>, std::vector<uint8_t>> masks_;
};

}  // namespace hangar::sched
