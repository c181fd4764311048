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
#include <unordered_map>
#include <vector>

#include "cluster/usage.h"
#include "sched/owner/planned_starts.h"
#include "sched/owner/ranks.h"
#include "sched/owner/workload.h"
#include "sched/queue/gittins.h"
#include "sched/queue/quota.h"
#include "sched/scheduler.h"
#include "sim/engine/disruption.h"
#include "sim/engine/engine.h"

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

  const std::vector<SimJob>& jobs() const override { return jobs_; }
  const std::vector<SimJobResult>& results() const override { return results_; }
  int64_t cycles() const override { return cycles_; }
  // GPU-milliseconds allocated over the run, and the span it covers (first submit to last end).
  int64_t busy_gpu_ms() const override { return busy_gpu_ms_; }
  const cluster::Topology& topology() const { return *topology_; }
  // With queues: GPU-milliseconds each queue (tree index; groups include their children) held.
  const std::vector<int64_t>& queue_gpu_ms() const override { return queue_gpu_ms_; }
  // With SimConfig::staging: the node caches (tests preload them) and what staging cost.
  StagingModel* staging_model() { return staging_.get(); }
  StagingStats staging_stats() const override {
    return staging_ ? staging_->stats() : StagingStats{};
  }
  MigReshapeStats mig_stats() const override { return mig_stats_; }
  // Failures and recoveries from outside the scheduler (disruption.h); null: none. Not owned.
  void set_disruptor(Disruptor* d) { disruptor_ = d; }

 private:
  friend class SimulatorControl;  // the SimControl a Disruptor acts through (simulator_control.cc)
  Simulator(std::shared_ptr<const cluster::Topology> topo, SimConfig config,
            std::unique_ptr<sched::Scheduler> scheduler);

  struct Running {
    size_t job;
    Time start;
    Time ready;  // when its objects are on all its nodes (start, without staging)
    Time end;
    cluster::GangAssignment assignment;
    int64_t milli;
    std::vector<int64_t> charge;  // to its queue, with queues
  };
  struct Completion {
    Time end;
    size_t job;
    uint64_t epoch;  // stale after a preemption
    bool operator>(const Completion& o) const { return end != o.end ? end > o.end : job > o.job; }
  };

  void Arrive(size_t job);
  // One cycle; true when it preempted jobs that are waiting again already (no grace), which the
  // controller would consider in another cycle at the same instant.
  bool Cycle(Time now);
  void Finish(Time now, size_t job);
  void Release(Time now, size_t job);  // frees its resources and forgets it is running
  // Starts a placed job; false when its GPUs are not free (victims still hold them).
  bool Start(Time now, const sched::Placement& p, std::vector<size_t>* started);
  void Preempt(Time now, const sched::Preemption& p, std::vector<size_t>* requeue);
  // With a preemption grace: a victim that has stopped gives its GPUs back and queues again.
  void Stopped(size_t job);
  void AccountBusy(Time now);
  // Staging (staging.h): when job `j`, placed on `a` at `now`, may run; and the pre-staging of
  // this cycle's reserved and nominated jobs.
  Time StageFor(Time now, size_t j, const cluster::GangAssignment& a);
  void Prestage(Time now, const sched::Decisions& d);
  void PrestageOn(Time now, size_t j, const std::vector<uint32_t>& nodes);
  Status InternArtifacts();  // fills set_of_
  static uint64_t PrestageOwner(size_t j) { return (uint64_t{1} << 63) | j; }
  using CachedRank = sched::owner::CachedRank;
  // The Gittins rank of job `j` at `age` (sched/owner/ranks.h), kept in `cache`.
  int64_t RankOf(size_t j, Duration age, CachedRank* cache);
  // Re-estimates the distributions if a finish made that due, and re-sorts the pending jobs if
  // their ranks changed.
  void RefreshRanks(Time now);

  std::shared_ptr<const cluster::Topology> topology_;
  SimConfig config_;
  std::unique_ptr<sched::Scheduler> scheduler_;
  cluster::ClusterUsage usage_;
  SimObserver observer_;

  std::vector<SimJob> jobs_;
  std::vector<SimJobResult> results_;
  std::vector<Duration> remaining_;  // run time left (plus restore costs)
  std::vector<int64_t> attained_;    // GPU-ms received so far
  std::vector<Duration> ran_;        // run time so far (restores included), ended runs
  std::vector<uint64_t> epoch_;
  std::vector<uint64_t> order_;  // by job index: its place in submission order, from 1
  std::vector<sched::Rule> last_rule_;
  // With an on_wait observer: this instant's latest verdict per job (by index), and their report.
  std::map<size_t, sched::Verdict> verdicts_;
  void ReportWaits(Time now);
  std::vector<sched::PendingJob> pending_;  // kept in the queue policy's order
  std::vector<sched::queue::OrderKey> pending_keys_;
  std::vector<std::unique_ptr<Running>> running_slots_;  // by job index; null when not running
  std::vector<sched::RunningJob> running_jobs_;          // what the scheduler sees
  std::vector<size_t> running_pos_;                      // job index -> position in running_jobs_
  // What a cycle updates on each running job, beside running_jobs_ so the update reads it in order.
  struct RunningInfo {
    size_t job;
    int64_t milli;
    int64_t attained;  // GPU-ms before this run
    Duration ran;      // run time before this run
    CachedRank rank;
  };
  std::vector<RunningInfo> running_info_;
  std::unordered_map<sched::JobId, size_t> index_of_;
  std::priority_queue<Completion, std::vector<Completion>, std::greater<>> completions_;
  // With a preemption grace: victims still stopping (by the time they stop), what each holds,
  // and per preemptor how many of its victims are still stopping.
  std::priority_queue<Completion, std::vector<Completion>, std::greater<>> stops_;
  std::unordered_map<size_t, std::unique_ptr<Running>> stopping_;
  std::unordered_map<size_t, size_t> stopping_for_;  // victim -> the job it was preempted for
  std::unordered_map<size_t, int> awaiting_;         // preemptor -> victims still stopping
  // victim -> jobs placed on GPUs it holds in the cycle that preempted it (besides its preemptor)
  std::unordered_map<size_t, std::vector<size_t>> also_waiting_;
  // As the controller does (ClusterState::StartPlanned): where the cycle that preempted placed
  // each preemptor (and each job it placed on GPUs the victims still held), in the order placed,
  // started there once its victims have stopped; and per preemptor what it holds meanwhile (the
  // part of its placement that was free, then its victims' GPUs as they stop).
  // Placements waiting for victims to stop and the GPUs held for them, by job index (shared with
  // the controller: sched/owner/planned_starts.h).
  sched::owner::PlannedStarts planned_;
  bool Waiting(size_t j) const {  // pending: neither running, stopping, ended nor held back
    return !running_slots_[j] && results_[j].end == kNever && !stopping_.count(j) && !held_back_[j];
  }
  // By job index: held back (SimControl::Submit, Withdraw) rather than arrived.
  std::vector<uint8_t> held_back_;
  // SimControl::Withdraw of a job that waits: out of the queue, with what was planned for it.
  void Unqueue(size_t j);
  void StartPlanned(Time now);
  void ReleaseHolds();
  // MIG reshapes in flight: when each GPU's ends.
  std::priority_queue<std::pair<Time, uint32_t>, std::vector<std::pair<Time, uint32_t>>,
                      std::greater<>>
      reshapes_;
  MigReshapeStats mig_stats_;
  void Reshape(Time now, const sched::MigReshapePlan& plan);
  int64_t cycles_ = 0;
  int64_t busy_gpu_ms_ = 0;
  int64_t allocated_milli_ = 0;
  Time last_account_ = 0;
  int32_t cpu_only_pending_ = 0;

  // With SimConfig::staging: the node caches, each job's object set (UINT32_MAX: none), and the
  // jobs whose objects are pinned for a reservation or nomination.
  std::unique_ptr<StagingModel> staging_;
  std::vector<uint32_t> set_of_;
  std::vector<size_t> prestaged_;

  // With queues: what each queue holds now, its decayed past usage and its GPU-ms so far.
  std::vector<std::vector<int64_t>> queue_usage_;
  std::vector<std::vector<double>> queue_history_;
  std::vector<int64_t> queue_gpu_ms_;
  // Adds (kAdd) or takes back (kRemove) what a job is charged, along its queue's path.
  enum class Charging : int8_t { kAdd = 1, kRemove = -1 };
  void ChargeQueue(size_t job, const std::vector<int64_t>& charge, Charging how);

  Disruptor* disruptor_ = nullptr;
  std::vector<sched::NodeWindow> windows_;  // SimControl::SetWindows
  void Disrupt(Time now);  // lets the disruptor act at `now`, through a SimulatorControl
  sched::owner::WorkloadLearner workload_;          // with learn_profile
  std::unique_ptr<sched::owner::RankBook> ranker_;  // null unless gittins_ranks
  // The class a job is ranked by now, and the class it falls back to (0: none).
  using RankClass = sched::owner::RankClass;
  RankClass ClassOf(size_t j) const;
  // With gittins_by_predecessor, by job index: its predecessor and successor (SIZE_MAX: none).
  std::vector<size_t> prev_, next_;
  std::vector<size_t> reclassed_;  // pending jobs whose predecessor finished since the last cycle
  uint64_t ranked_version_ = 0;    // the ranker version the pending order reflects
  std::vector<CachedRank> rank_cache_;  // by job index, for pending jobs
  // With queues, by job index: what the job is charged unplaced (computed on its first arrival;
  // the cycle reads it through PendingJob::charge).
  std::vector<std::vector<int64_t>> ask_charge_;
};

}  // namespace hangar::sim
