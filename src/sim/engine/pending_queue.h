// The lean engine's waiting jobs (Simulator): kept in the queue policy's order as they arrive, so
// a cycle takes them presorted, and the count of those that need no GPU.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "sched/queue/queue_policy.h"
#include "sched/snapshot.h"

namespace hangar::sim {

class PendingQueue {
 public:
  explicit PendingQueue(const sched::queue::QueuePolicy& policy) : policy_(policy) {}
  void Clear();
  // Queues `p` after every job whose key is not greater (arrival order among equals).
  void Insert(const sched::PendingJob& p);
  // The position of job `id`; size() when it does not wait.
  size_t Find(sched::JobId id) const;
  void Erase(size_t pos);
  // Erases the jobs at `positions` (any order); the others keep their order.
  void EraseAll(std::span<const size_t> positions);
  // Job `pos` changed its key: it moves to its new place.
  void Rekey(size_t pos);
  // Every key may have changed: `update` each job, then sort them by their new keys.
  void RekeyAll(const std::function<void(sched::PendingJob&)>& update);
  std::vector<sched::PendingJob>& jobs() { return jobs_; }
  const std::vector<sched::PendingJob>& jobs() const { return jobs_; }
  size_t size() const { return jobs_.size(); }
  bool empty() const { return jobs_.empty(); }
  // The jobs that need no GPU and have not started: the engine counts them as they arrive,
  // start and come back (Snapshot::cpu_only_pending).
  int32_t cpu_only() const { return cpu_only_; }
  void CountCpuOnly(int32_t delta) { cpu_only_ += delta; }

 private:
  const sched::queue::QueuePolicy& policy_;
  std::vector<sched::PendingJob> jobs_;
  std::vector<sched::queue::OrderKey> keys_;  // jobs_[i]'s key
  int32_t cpu_only_ = 0;
};

}  // namespace hangar::sim
