// Scheduler::Cycle: one scheduling cycle, the table of contents of Hangar's scheduling.
//
//   1. order the queue (queue/)           which job next
//   2. copy the usage                     plan on a private copy, never on live state
//   3. for each job in order (fair share across queues), the stages of Scheduler::Run:
//        admission (queue/quota.h)          may its queue start it now
//        place the whole gang (placement/)  where: all of it or none of it
//        or preempt what it outranks        victims, budget, ranks (preemption.h)
//        or explain why not                 never / not now, with the rule and the numbers
//        reserve for the first blocked job  EASY backfill: later jobs may not delay it
//   4. return the decisions               the caller commits them, then acts
//
// Deterministic: the same Snapshot and `now` give the same Decisions, from any Scheduler: the
// placer's draws restart from the snapshot's seed every cycle. Not thread-safe: one thread (the
// state owner, or the simulator) drives a Scheduler.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <unordered_map>

#include "common/status.h"
#include "sched/backfill.h"
#include "sched/placement/gang_placer.h"
#include "sched/preemption.h"
#include "sched/queue/queue_policy.h"
#include "sched/snapshot.h"

namespace hangar::sched {

enum class BackfillMode : uint8_t {
  kNone,  // jobs behind a blocked job may still start wherever they fit (no reservation)
  kEasy,  // the first blocked job reserves nodes; later jobs start only if they do not delay it
};

struct SchedulerConfig {
  std::string queue_policy = "priority";
  std::string placement_policy = "hangar";
  BackfillMode backfill = BackfillMode::kEasy;
  // Strict order: nothing starts behind a blocked job (a plain FIFO). Overrides backfill.
  bool strict_order = false;
  // At most this many placements per cycle (0: no limit), so a cycle's commit stays short.
  int max_placements = 0;
  PreemptionConfig preemption;
};

class Scheduler {
 public:
  // Fails on an unknown policy name, naming the known ones.
  static StatusOr<std::unique_ptr<Scheduler>> Create(const SchedulerConfig& config);

  Decisions Cycle(const Snapshot& snapshot, Time now);

  const SchedulerConfig& config() const { return config_; }
  const queue::QueuePolicy& queue_policy() const { return *queue_policy_; }

  // Whether a request can ever fit `topology` (Rule::kNone when it can), remembered per request
  // shape for as long as the topology is the same one: the one cache of this answer, for the
  // cycle and for owners that refuse such requests up front (the controller, at submission).
  const Reason& NeverReason(const cluster::Topology& topology, const GangRequest& request);

 private:
  Scheduler(SchedulerConfig config, std::unique_ptr<queue::QueuePolicy> q,
            std::unique_ptr<placement::NodeScorer> s);
  class Run;  // one cycle's state and its stages (scheduler.cc)

  SchedulerConfig config_;
  std::unique_ptr<queue::QueuePolicy> queue_policy_;
  std::unique_ptr<placement::NodeScorer> scorer_;
  placement::GangPlacer placer_;
  std::vector<uint32_t> order_;
  // The cycle's private copy of the usage, kept between cycles so that copying the next one
  // reuses its buffers (a copy per cycle was a tenth of a Philly replay, mostly malloc).
  std::optional<cluster::ClusterUsage> work_;
  cluster::ClusterUsage& CopyOfUsage(const cluster::ClusterUsage& usage);
  ReservationScratch reservation_scratch_;  // likewise for backfill's reservation
  const cluster::Topology* never_topology_ = nullptr;
  // Never-reasons by request (kNone: could fit), for never_topology_; cleared when the topology
  // changes. Keyed by fingerprint, and a hit compares the whole request (SamePlacement): two
  // requests may share a fingerprint. A multimap, so references to reasons stay valid.
  struct NeverEntry {
    GangRequest request;
    Reason reason;
  };
  std::unordered_multimap<uint64_t, NeverEntry> never_;
};

}  // namespace hangar::sched
