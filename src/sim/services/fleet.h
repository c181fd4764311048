// A serving fleet inside a simulation (docs/sim-services.md): a Disruptor that autoscales one
// service's replicas to its request curve and books what the fleet served. Replicas are jobs of
// the simulation, held back until wanted: the fleet submits replica k when it wants more than k
// replicas and withdraws it when it wants k or fewer (the highest first), and the scheduler places
// each like any job -- preempting for it, or preempting it, by the usual rules. A replica serves
// from `warmup` after it starts until it is withdrawn or preempted (drained at once).
//
// Shortfall: over the measured span [measure.from, measure.to), the demand the ready replicas could
// not serve, integrated in steps of at most 10 s. The fleet keeps serving after the span, to the
// same daily curve, until the runner says the other jobs are done (or Span::stop_by), so that they
// meet the same fleet all their lives; then it withdraws every replica and stops.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <utility>
#include <vector>

#include "sim/engine/disruption.h"
#include "sim/services/fleet_spec.h"

namespace hangar::sim {

// What the fleet served over the measured span.
struct FleetLedger {
  Duration span = 0;            // time measured
  double demand_rps_s = 0;      // requests asked for
  double unserved_rps_s = 0;    // requests beyond the ready replicas' capacity
  Duration under_demand = 0;    // time the capacity was below the demand
  double replica_gpu_s = 0;     // GPU-seconds the fleet's replicas held (warming up or ready)
  double wanted_replica_s = 0;  // replica-seconds the autoscaler wanted
  int peak_replicas = 0;        // most replicas running at once
  int64_t scale_outs = 0, scale_ins = 0;  // autoscaler steps that changed the count
  int64_t replicas_preempted = 0;         // replicas the scheduler took back
  int64_t replica_starts = 0;

  double unserved_fraction() const { return demand_rps_s > 0 ? unserved_rps_s / demand_rps_s : 0; }
  double under_fraction() const {
    return span > 0 ? static_cast<double>(under_demand) / static_cast<double>(span) : 0;
  }
};

class ServingFleet : public Disruptor {
 public:
  // `replica_jobs[k]` is the job index of replica k (max_replicas of them, held back). The fleet
  // first scales at `first_tick` (before the span, so that it is warm when the span opens).
  struct Span {
    Time first_tick = 0;
    Time from = 0, to = 0;  // measured
    Time stop_by = kNever;  // stops here even if the other jobs are not done
  };
  ServingFleet(const ServingFleetSpec& spec, std::vector<size_t> replica_jobs, Span span);

  Time NextEvent() const override;
  void Act(Time now, SimControl& sim) override;

  // From the simulation's observer: replica k (an index into replica_jobs) started or was
  // preempted.
  void OnStart(Time now, size_t replica);
  void OnPreempt(Time now, size_t replica);
  // The other jobs are all done: at the next instant the fleet withdraws its replicas and stops.
  void OthersDone() { others_done_ = true; }

  // The replica count the autoscaler wants at `now` from what it recommended before.
  int Wanted() const { return wanted_; }
  int ReadyAt(Time t) const;
  const FleetLedger& ledger() const { return ledger_; }
  bool stopped() const { return stopped_; }

 private:
  void Account(Time from, Time to);  // books [from, to) with the replicas as they are
  void Scale(Time now, SimControl& sim);
  int Recommend(Time now) const;

  ServingFleetSpec spec_;
  std::vector<size_t> jobs_;
  std::vector<Time> ready_at_;    // by replica: when it serves (kNever: it does not)
  std::vector<uint8_t> running_;  // by replica: holds its GPUs
  Span span_;
  Time next_tick_;
  Time last_ = 0;
  int wanted_ = 0;
  std::deque<std::pair<Time, int>> recent_;  // recommendations within scale_down_after
  bool others_done_ = false, stopped_ = false;
  FleetLedger ledger_;
};

}  // namespace hangar::sim
