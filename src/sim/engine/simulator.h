// A discrete-event simulator that drives the production Scheduler::Cycle -- the same code the
// controller runs, not a copy of any policy. Jobs arrive at their submit times, start when a
// cycle places them, and finish after their run time; a preempted job goes back to the queue and
// pays a restore cost when it runs again. With `gittins_ranks` the simulator is also the owner
// that learns run times: it reports each finished job's run time to a GittinsRanker and hands the
// scheduler the ranks, as the controller would; the scheduler never sees a true run time.
//
// Single-threaded; one Simulator per cluster partition.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <queue>
#include <string>
#include <vector>

#include "cluster/usage.h"
#include "sched/owner/planned_starts.h"
#include "sched/owner/workload.h"
#include "sched/scheduler.h"
#include "sim/engine/accounts.h"
#include "sim/engine/disruption.h"
#include "sim/engine/engine.h"
#include "sim/engine/grace_stops.h"
#include "sim/engine/job_table.h"
#include "sim/engine/mig_reshapes.h"
#include "sim/engine/pending_queue.h"
#include "sim/engine/rank_keeper.h"
#include "sim/engine/running_table.h"

namespace hangar::sim {

class Simulator : public Engine {
 public:
  // Fails when the scheduler configuration names an unknown policy.
  static StatusOr<std::unique_ptr<Simulator>> Create(std::shared_ptr<const cluster::Topology> topo,
                                                     const SimConfig& config);

  // Jobs may be added in any order before Run().
  void AddJob(SimJob job) override;
  void set_observer(SimObserver o) override { observer_ = std::move(o); }
  // Runs until every job has finished or is known never to fit.
  Status Run() override;

  const std::vector<SimJob>& jobs() const override { return jobs_.specs(); }
  const std::vector<SimJobResult>& results() const override { return jobs_.results(); }
  int64_t cycles() const override { return accounts_.cycles(); }
  // GPU-milliseconds allocated over the run, and the span it covers (first submit to last end).
  int64_t busy_gpu_ms() const override { return accounts_.busy_gpu_ms(); }
  const cluster::Topology& topology() const { return *topology_; }
  // With queues: GPU-milliseconds each queue (tree index; groups include their children) held.
  const std::vector<int64_t>& queue_gpu_ms() const override { return accounts_.queue_gpu_ms(); }
  // With SimConfig::staging: the node caches (tests preload them) and what staging cost.
  StagingModel* staging_model() { return staging_.get(); }
  StagingStats staging_stats() const override {
    return staging_ ? staging_->stats() : StagingStats{};
  }
  MigReshapeStats mig_stats() const override { return reshapes_.stats(); }
  // Failures and recoveries from outside the scheduler (disruption.h); null: none. Not owned.
  void set_disruptor(Disruptor* d) { disruptor_ = d; }

 private:
  friend class SimulatorControl;  // the SimControl a Disruptor acts through (simulator_control.cc)
  Simulator(std::shared_ptr<const cluster::Topology> topo, SimConfig config,
            std::unique_ptr<sched::Scheduler> scheduler);

  // Jobs not held back, in submission order (each given its place, JobProgress::order).
  std::vector<size_t> Arrivals();
  void Arrive(size_t job);
  // One cycle; true when it preempted jobs that are waiting again already (no grace), which the
  // controller would consider in another cycle at the same instant.
  bool Cycle(Time now);
  sched::Snapshot SnapshotAt(Time now);
  // A cycle's placements: started, or (after a preemption) planned to start once victims stop.
  void Apply(Time now, const sched::Decisions& d);
  void Finish(Time now, size_t job);
  void Release(Time now, size_t job);  // frees its resources and forgets it is running
  // Starts a placed job; false when its GPUs are not free (victims still hold them).
  bool Start(Time now, const sched::Placement& p, std::vector<size_t>* started);
  void Preempt(Time now, const sched::Preemption& p, std::vector<size_t>* requeue);
  // With a preemption grace: a victim that has stopped gives its GPUs back and queues again.
  void Stopped(size_t job);
  // Pending: neither running, stopping, ended nor held back.
  bool Waiting(size_t j) const {
    return !running_.Find(j) && jobs_.result(j).end == kNever && !grace_.Stopping(j) &&
           !jobs_.at(j).held_back;
  }
  // SimControl::Withdraw of a job that waits: out of the queue, with what was planned for it.
  void Unqueue(size_t j);
  void StartPlanned(Time now);
  void ReleaseHolds();
  // Staging (staging.h): when job `j`, placed on `a` at `now`, may run; and the pre-staging of
  // this cycle's reserved and nominated jobs.
  Time StageFor(Time now, size_t j, const cluster::GangAssignment& a);
  void Prestage(Time now, const sched::Decisions& d);
  void PrestageOn(Time now, size_t j, const std::vector<uint32_t>& nodes);
  Status InternArtifacts();  // fills JobProgress::artifact_set
  static uint64_t PrestageOwner(size_t j) { return (uint64_t{1} << 63) | j; }
  // Re-estimates the distributions if a finish made that due, and re-sorts the pending jobs if
  // their ranks changed.
  void RefreshRanks(Time now);
  // With an on_wait observer: reports this instant's verdicts whose reason changed.
  void ReportWaits(Time now);
  void Disrupt(Time now);  // lets the disruptor act at `now`, through a SimulatorControl

  std::shared_ptr<const cluster::Topology> topology_;
  SimConfig config_;
  std::unique_ptr<sched::Scheduler> scheduler_;
  cluster::ClusterUsage usage_;
  SimObserver observer_;
  // The owners of the engine's state, each in its own file.
  JobTable jobs_;
  PendingQueue pending_;  // in the queue policy's order
  RunningTable running_;
  std::priority_queue<Completion, std::vector<Completion>, std::greater<>> completions_;
  GraceStops grace_;  // with a preemption grace: victims still stopping, who waits for them
  // Placements waiting for victims to stop and the GPUs held for them, by job index (shared with
  // the controller: sched/owner/planned_starts.h).
  sched::owner::PlannedStarts planned_;
  MigReshapes reshapes_;
  Accounts accounts_;
  std::unique_ptr<RankKeeper> ranks_;       // null unless gittins_ranks
  sched::owner::WorkloadLearner workload_;  // with learn_profile
  // With SimConfig::staging: the node caches, and the jobs whose objects are pinned for a
  // reservation or nomination.
  std::unique_ptr<StagingModel> staging_;
  std::vector<size_t> prestaged_;
  // With an on_wait observer: this instant's latest verdict per job (by index).
  std::map<size_t, sched::Verdict> verdicts_;
  Disruptor* disruptor_ = nullptr;
  std::vector<sched::NodeWindow> windows_;  // SimControl::SetWindows
};

}  // namespace hangar::sim
