// EASY backfill's reservation: when the first blocked job could start if running jobs end when
// expected (their time limits, or a queue default), and which nodes it would take then. Later
// jobs may use those nodes only if they end before that time.
#pragma once

#include <optional>
#include <span>
#include <vector>

#include "cluster/usage.h"
#include "sched/placement/gang_placer.h"
#include "sched/snapshot.h"

namespace hangar::sched {

struct ShadowPlan {
  bool found = false;
  Time start = kNever;  // kNever: it fits once jobs without an expected end are gone
  std::vector<uint32_t> nodes;
};

// What PlanReservation works in, kept by its caller between calls so that planning the next
// reservation reuses these buffers.
struct ReservationScratch {
  struct Release {
    Time end;
    uint64_t id;
    const cluster::GangAssignment* assignment;
  };
  std::vector<Release> releases;
  std::optional<cluster::ClusterUsage> future;
};

// `work` is the cycle's usage with this cycle's placements applied; `placed` are those
// placements (ending at now + their job's time limit). Does not change `work`.
ShadowPlan PlanReservation(const cluster::ClusterUsage& work, std::span<const RunningJob> running,
                           std::span<const Placement> placed, std::span<const PendingJob> pending,
                           const GangRequest& req, placement::GangPlacer& placer,
                           const placement::PlaceOptions& opts, Time now,
                           ReservationScratch* scratch = nullptr);

}  // namespace hangar::sched
