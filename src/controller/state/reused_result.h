// A result that is costly to compute (a walk of every job, node and GPU), reused for twenty times
// as long as it took, and never for more than two seconds: a reader that asks often (a /metrics
// scrape) then costs the state thread at most ~5%, and on a small cluster it is computed afresh
// every time. Not thread-safe: one thread owns it.
#pragma once

#include <algorithm>
#include <cstdint>

namespace hangar::controller {

template <typename T>
class ReusedResult {
 public:
  static constexpr int64_t kReuseFactor = 20;
  static constexpr int64_t kMaxReuseNs = 2'000'000'000;

  // The kept result while it may still be used at `now_ns` (a monotonic clock), else null.
  T* Fresh(int64_t now_ns) { return now_ns < valid_until_ns_ ? &value_ : nullptr; }
  // Keeps `value`, computed from `start_ns` to `end_ns`.
  void Keep(const T& value, int64_t start_ns, int64_t end_ns) {
    value_ = value;
    valid_until_ns_ = start_ns + std::min<int64_t>(kReuseFactor * (end_ns - start_ns), kMaxReuseNs);
  }

 private:
  T value_{};
  int64_t valid_until_ns_ = 0;
};

}  // namespace hangar::controller
