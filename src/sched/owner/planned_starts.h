// Placements a scheduling cycle made that wait for preempted jobs to stop, and the GPUs held for
// them meanwhile. Both engines keep them here -- the controller (ClusterState) and the simulator --
// so that a preemptor, and a job placed on GPUs its victims still hold, starts where its cycle
// placed it, in the order the cycles placed them, and nobody else takes its GPUs while it waits.
//
// A key is the engine's handle for a job: the controller's job id, the simulator's job index.
#pragma once

#include <cstdint>
#include <functional>
#include <unordered_map>
#include <vector>

#include "cluster/usage.h"
#include "sched/snapshot.h"

namespace hangar::sched::owner {

class PlannedStarts {
 public:
  using Key = uint64_t;

  // Remembers where `key`'s cycle placed it; a later plan for it replaces this one (and goes
  // last in the order).
  void Plan(Key key, Placement p);
  bool planned(Key key) const { return planned_.count(key) > 0; }
  bool empty() const { return planned_.empty(); }

  // Holds `share` -- allocated in the usage -- for `key` until it starts or stops waiting.
  void Hold(Key key, cluster::GangAssignment share);
  // Allocates what of `a` is free in `usage` now and holds it for `key`.
  void HoldWhatIsFree(Key key, cluster::ClusterUsage& usage, const cluster::GangAssignment& a);
  bool holds(Key key) const { return held_.count(key) > 0; }

  // What a plan is now, as its engine sees the job.
  enum class Due : uint8_t {
    kWait,   // still waiting for victims to stop: kept
    kStart,  // may start: taken out, its held GPUs given back, then handed to `start`
    kDrop,   // no longer pending: the plan is forgotten (its hold stays for ReleaseHolds)
  };
  // Visits the plans in the order they were made. `start` may fail to start the job (the nodes
  // changed meanwhile): it then waits for a cycle to place it afresh.
  void StartDue(cluster::ClusterUsage& usage, const std::function<Due(Key)>& due,
                const std::function<void(Key, Placement&)>& start);

  // Gives back what is held for every key for which `waiting` is false.
  void ReleaseHolds(cluster::ClusterUsage& usage, const std::function<bool(Key)>& waiting);
  // Forgets `key`'s plan and gives back what is held for it (the job was withdrawn).
  void Forget(Key key, cluster::ClusterUsage& usage);

 private:
  void GiveBack(Key key, cluster::ClusterUsage& usage);

  struct Planned {
    Placement placement;
    uint64_t order = 0;
  };
  std::unordered_map<Key, Planned> planned_;
  uint64_t next_order_ = 0;
  std::unordered_map<Key, std::vector<cluster::GangAssignment>> held_;
};

}  // namespace hangar::sched::owner
