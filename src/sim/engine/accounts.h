// What the lean engine (Simulator) measures as it runs: the GPUs allocated now and the GPU time
// over the run, the cycles run, and with queues what each queue holds now (charged along its path
// to the root), its decayed history for fair share, and its GPU time.
#pragma once

#include <cstdint>
#include <vector>

#include "common/time.h"
#include "sched/queue/quota.h"

namespace hangar::sim {

class Accounts {
 public:
  // `tree` null: no queues. `half_life` > 0: fair share remembers usage with it.
  Accounts(const sched::queue::QueueTree* tree, Duration half_life);
  // Zero everything; time counts from `first`.
  void Reset(Time first);
  // Time passes to `now` with what is allocated and charged (a `now` in the past does nothing).
  void Advance(Time now);
  void Allocate(int64_t milli) { allocated_milli_ += milli; }
  void Free(int64_t milli) { allocated_milli_ -= milli; }
  enum class Charging : int8_t { kAdd = 1, kRemove = -1 };
  // Adds (kAdd) or takes back (kRemove) what a job of `leaf` is charged, along the queue's path.
  void Charge(uint32_t leaf, const std::vector<int64_t>& charge, Charging how);
  void CountCycle() { ++cycles_; }

  int64_t allocated_milli() const { return allocated_milli_; }
  int64_t busy_gpu_ms() const { return busy_gpu_ms_; }
  int64_t cycles() const { return cycles_; }
  // Per queue-tree node: GPU-ms held so far, and the history fair share reads.
  const std::vector<int64_t>& queue_gpu_ms() const { return queue_gpu_ms_; }
  const std::vector<std::vector<double>>& history() const { return history_; }
  const std::vector<std::vector<int64_t>>& usage() const { return usage_; }

 private:
  const sched::queue::QueueTree* tree_;
  Duration half_life_;
  Time last_ = 0;
  int64_t allocated_milli_ = 0;
  int64_t busy_gpu_ms_ = 0;
  int64_t cycles_ = 0;
  std::vector<std::vector<int64_t>> usage_;
  std::vector<std::vector<double>> history_;
  std::vector<int64_t> queue_gpu_ms_;
};

}  // namespace hangar::sim
