// What the cluster's resources are allocated to: the usage of every node and GPU
// (cluster::ClusterUsage), the tasks of earlier attempts still stopping somewhere -- their shares
// stay allocated until they end, or are kept for the job that preempted them -- and the
// placements that wait for preemption victims to stop, with the GPUs held for them
// (sched::owner::PlannedStarts). The facade's flows (cluster_state.h) decide what to allocate,
// stop and plan; this keeps the three in step.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <unordered_map>

#include "cluster/topology.h"
#include "cluster/usage.h"
#include "common/time.h"
#include "sched/owner/planned_starts.h"
#include "sched/snapshot.h"

namespace hangar::controller {

class Allocations {
 public:
  // A task of an earlier attempt (a "zombie") still running somewhere: its share stays allocated
  // until it ends.
  struct Stopping {
    uint32_t node = 0;
    cluster::GangAssignment share;
    sched::JobId held_for = 0;  // preempted for this job: its share is kept for it when it ends
    // On a lost node: it counts as stopped at this time, when the node's fence has stopped it;
    // -1: when its agent reports its end.
    Time fence_ends = -1;
  };
  // By task id ("JOB.ATTEMPT.INDEX").
  using StoppingTasks = std::unordered_map<std::string, Stopping>;

  explicit Allocations(std::shared_ptr<const cluster::Topology> topology)
      : usage_(std::move(topology)) {}

  cluster::ClusterUsage& usage() { return usage_; }
  const cluster::ClusterUsage& usage() const { return usage_; }
  sched::owner::PlannedStarts& planned() { return planned_; }
  const sched::owner::PlannedStarts& planned() const { return planned_; }
  StoppingTasks& stopping() { return stopping_; }
  const StoppingTasks& stopping() const { return stopping_; }

  // Task `task` stops on `node`, its `share` allocated until it ends (`fence_ends`: see Stopping).
  void Stop(const std::string& task, uint32_t node, cluster::GangAssignment share,
            Time fence_ends = -1);
  // Whether a task still stops on `node`.
  bool StoppingOn(uint32_t node) const;
  // Whether a task of job `job` still stops.
  bool StoppingOf(sched::JobId job) const;
  // Marks the stopping tasks of job `of` as held for job `for_job`: what they free is kept for it
  // (EndStopping), not given back to the pool. Those on node `except` are not.
  void HoldStopping(sched::JobId of, sched::JobId for_job, uint32_t except = UINT32_MAX);
  // Where an ended stopping task's share goes: back to the pool, or held for the job it was held
  // for (held_for), which still waits for it.
  enum class ShareTo : uint8_t { kPool, kHolder };
  // Stopping task `z` has ended: its share goes `to` the pool or its holder. Returns its task id.
  std::string EndStopping(StoppingTasks::iterator z, ShareTo to);
  // Gives back what is held for planned starts whose jobs no longer wait (`waiting` says which
  // still do).
  void ReleaseHolds(const std::function<bool(sched::JobId)>& waiting) {
    planned_.ReleaseHolds(usage_, waiting);
  }

 private:
  cluster::ClusterUsage usage_;
  StoppingTasks stopping_;
  sched::owner::PlannedStarts planned_;
};

}  // namespace hangar::controller
