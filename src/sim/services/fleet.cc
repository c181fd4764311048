#include "sim/services/fleet.h"

#include <algorithm>
#include <cmath>

namespace hangar::sim {

namespace {
constexpr Duration kStep = 10 * kSecond;  // the shortfall integral's step
}  // namespace

ServingFleet::ServingFleet(const ServingFleetSpec& spec, std::vector<size_t> replica_jobs,
                           Span span)
    : spec_(spec),
      jobs_(std::move(replica_jobs)),
      ready_at_(jobs_.size(), kNever),
      running_(jobs_.size(), 0),
      span_(span),
      next_tick_(span.first_tick),
      last_(span.first_tick) {}

Time ServingFleet::NextEvent() const {
  if (stopped_) return kNever;
  Time t = next_tick_;
  for (Time r : ready_at_) {
    if (r > last_ && r < t) t = r;
  }
  return t;
}

int ServingFleet::ReadyAt(Time t) const {
  return static_cast<int>(
      std::count_if(ready_at_.begin(), ready_at_.end(), [t](Time r) { return r <= t; }));
}

void ServingFleet::Account(Time from, Time to) {
  from = std::max(from, span_.from);
  to = std::min(to, span_.to);
  if (to <= from) return;
  // Replicas change only at instants the simulation stops at, and readiness is one of them.
  const double capacity = ReadyAt(from) * spec_.rps_per_replica;
  const int running = static_cast<int>(std::count(running_.begin(), running_.end(), 1));
  ledger_.peak_replicas = std::max(ledger_.peak_replicas, running);
  for (Time t = from; t < to; t += kStep) {
    const Duration dt = std::min(kStep, to - t);
    const double secs = static_cast<double>(dt) / kSecond;
    const double demand = spec_.demand.RpsAt(t + dt / 2);
    ledger_.demand_rps_s += demand * secs;
    if (demand > capacity) {
      ledger_.unserved_rps_s += (demand - capacity) * secs;
      ledger_.under_demand += dt;
    }
  }
  const double secs = static_cast<double>(to - from) / kSecond;
  ledger_.span += to - from;
  ledger_.replica_gpu_s += running * spec_.gpus_per_replica * secs;
  ledger_.wanted_replica_s += wanted_ * secs;
}

int ServingFleet::Recommend(Time now) const {
  const double need = spec_.demand.RpsAt(now) * (1 + spec_.headroom) / spec_.rps_per_replica;
  // A hair below an integer is that integer: floating point must not add a replica.
  const auto n = static_cast<int64_t>(std::ceil(need - 1e-9));
  return static_cast<int>(std::clamp<int64_t>(n, spec_.min_replicas, spec_.max_replicas));
}

void ServingFleet::Scale(Time now, SimControl& sim) {
  const int rec = Recommend(now);
  recent_.emplace_back(now, rec);
  while (!recent_.empty() && recent_.front().first < now - spec_.scale_down_after)
    recent_.pop_front();
  int most = 0;
  for (const auto& [t, n] : recent_) most = std::max(most, n);
  // Out at once; in only when every recommendation of the window was lower.
  const int target = rec >= wanted_ ? rec : std::min(wanted_, most);
  const bool measured = now >= span_.from && now < span_.to;
  if (measured && target > wanted_) ledger_.scale_outs++;
  if (measured && target < wanted_) ledger_.scale_ins++;
  wanted_ = target;
  for (size_t k = 0; k < jobs_.size(); ++k) {
    const bool want = static_cast<int>(k) < target;
    if (want && sim.HeldBack(jobs_[k])) sim.Submit(now, jobs_[k]);
    if (!want && !sim.HeldBack(jobs_[k])) {
      sim.Withdraw(now, jobs_[k]);  // the highest first: surge replicas before the minimum
      ready_at_[k] = kNever;
      running_[k] = 0;
    }
  }
}

void ServingFleet::Act(Time now, SimControl& sim) {
  if (stopped_) return;
  Account(last_, now);
  last_ = std::max(last_, now);
  if (now < span_.first_tick) return;
  if ((others_done_ && now >= span_.to) || now >= span_.stop_by) {
    for (size_t k = 0; k < jobs_.size(); ++k) {
      sim.Withdraw(now, jobs_[k]);
      ready_at_[k] = kNever;
      running_[k] = 0;
    }
    stopped_ = true;
    return;
  }
  if (now < next_tick_) return;
  Scale(now, sim);
  while (next_tick_ <= now) next_tick_ += spec_.interval;
}

void ServingFleet::OnStart(Time now, size_t replica) {
  running_[replica] = 1;
  ready_at_[replica] = now + spec_.warmup;
  if (now >= span_.from && now < span_.to) ledger_.replica_starts++;
}

void ServingFleet::OnPreempt(Time now, size_t replica) {
  // Drained from rotation as its grace begins; the scheduler queues it again.
  running_[replica] = 0;
  ready_at_[replica] = kNever;
  if (now >= span_.from && now < span_.to) ledger_.replicas_preempted++;
}

}  // namespace hangar::sim
