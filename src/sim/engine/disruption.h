// What happens to a simulation from outside the scheduler: nodes that fail and come back, jobs
// interrupted and restarted by a recovery policy (sim/failures.h, sim/goodput_loop.h). The lean
// Simulator calls a Disruptor at every instant it stops at, before that instant's scheduling
// cycle, and hands it a SimControl: the few operations a failure and its recovery need. The model
// of what fails and how a policy recovers lives with the Disruptor, not in the engine.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "cluster/usage.h"
#include "common/status.h"
#include "common/time.h"
#include "sched/snapshot.h"

namespace hangar::sim {

// Jobs are named by their index in Engine::jobs().
class SimControl {
 public:
  virtual ~SimControl() = default;
  virtual const cluster::ClusterUsage& usage() const = 0;
  // Jobs holding GPUs on node n (running, or held by Reassign without progress), in index order.
  virtual std::vector<size_t> JobsOn(uint32_t node) const = 0;
  // What job j holds now; null when it holds nothing.
  virtual const cluster::GangAssignment* AssignmentOf(size_t j) const = 0;
  // When job j's current run started (its last start, Reassign included), and when it will end
  // (kNever while it is held without progress). Only for a job AssignmentOf names.
  virtual Time RunStart(size_t j) const = 0;
  virtual Time RunEnd(size_t j) const = 0;
  virtual void SetNodeCondition(uint32_t node, const cluster::NodeCondition& c) = 0;
  // Stops job j now (it must hold an assignment) and queues it again with `remaining` run time.
  // `to_back`: as a new submission at `now`, behind every job waiting; else at its old place.
  virtual void Requeue(Time now, size_t j, Duration remaining, bool to_back) = 0;
  // Job j (which must hold an assignment) holds `assignment` instead from now and runs for
  // `remaining` more (kNever: holds it without progress until the next Reassign). Fails, changing
  // nothing, when what `assignment` adds is not free.
  [[nodiscard]] virtual Status Reassign(Time now, size_t j,
                                        const cluster::GangAssignment& assignment,
                                        Duration remaining) = 0;
  // Job j, held back (added with submit kNever, or withdrawn), arrives now as a new submission,
  // behind every job waiting. Does nothing to a job that is not held back.
  virtual void Submit(Time now, size_t j) = 0;
  // Job j leaves without finishing and is held back until the next Submit: stopped at once if it
  // runs (its GPUs free now), taken out of the queue if it waits, and not queued again if it is
  // stopping after a preemption. Its run time left is kept. Does nothing to a held-back job.
  virtual void Withdraw(Time now, size_t j) = 0;
  // Whether job j is held back.
  virtual bool HeldBack(size_t j) const = 0;
  // The reservation windows every scheduling cycle sees from now on (Snapshot::windows), as the
  // controller's reservation book gives them: the windows booked so far.
  virtual void SetWindows(std::vector<sched::NodeWindow> windows) = 0;
};

class Disruptor {
 public:
  virtual ~Disruptor() = default;
  // The next instant it must act at (kNever: none). The simulation runs while it has one.
  virtual Time NextEvent() const = 0;
  // Called at every instant the simulation stops at, after that instant's arrivals and ends and
  // before its scheduling cycle.
  virtual void Act(Time now, SimControl& sim) = 0;
};

}  // namespace hangar::sim
