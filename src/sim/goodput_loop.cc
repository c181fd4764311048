#include "sim/goodput_loop.h"

#include <algorithm>

#include "sim/goodput_spares.h"

namespace hangar::sim {

std::string_view RecoveryPolicyName(RecoveryPolicy p) {
  switch (p) {
    case RecoveryPolicy::kSpares:
      return "spares";
    case RecoveryPolicy::kNoSpares:
      return "no_spares";
    case RecoveryPolicy::kNaive:
      return "naive";
  }
  return "unknown";
}

namespace {

std::vector<int32_t> GpusPerNode(const cluster::Topology& topo) {
  std::vector<int32_t> gpus;
  for (const auto& n : topo.nodes()) gpus.push_back(n.num_gpus);
  return gpus;
}

constexpr cluster::NodeCondition kOutOfService{.schedulable = false};

}  // namespace

GoodputLoop::GoodputLoop(GoodputLoopConfig config, const cluster::Topology& topo,
                         size_t training_job, Duration work, job::TopologyConstraint rule,
                         Time from)
    : config_(std::move(config)),
      topo_(topo),
      job_(training_job),
      rule_(rule),
      failures_(config_.scripted.empty()
                    ? FailureStream(config_.rates, GpusPerNode(topo), from, config_.seed)
                    : FailureStream(config_.scripted)),
      ledger_(work, config_.checkpoint_interval),
      down_until_(topo.nodes().size(), 0),
      spare_(topo.nodes().size(), 0) {
  if (config_.policy == RecoveryPolicy::kSpares) {
    for (uint32_t n : config_.spares) spare_[n] = 1;
    spare_target_ = config_.spares.size();
  }
}

Time GoodputLoop::NextEvent() const {
  Time t = repairs_.empty() ? kNever : repairs_.top().first;
  if (phase_ == Phase::kDone) return t;
  return std::min({t, failures_.next().at, recover_at_, slow_swap_at_});
}

void GoodputLoop::Act(Time now, SimControl& sim) {
  if (!started_) {
    // Kept from the training job's first placement; opportunistic work runs there from its start.
    for (uint32_t n = 0; n < spare_.size(); ++n) {
      if (spare_[n]) sim.SetNodeCondition(n, kOutOfService);
    }
    started_ = true;
  }
  if (phase_ != Phase::kWaitingToStart && !spares_open_) {
    for (uint32_t n = 0; n < spare_.size(); ++n) {
      if (spare_[n]) sim.SetNodeCondition(n, {});
    }
    spares_open_ = true;
  }
  while (!repairs_.empty() && repairs_.top().first <= now) {
    const uint32_t n = repairs_.top().second;
    repairs_.pop();
    down_until_[n] = 0;
    const auto spares = static_cast<size_t>(std::count(spare_.begin(), spare_.end(), 1));
    if (spares < spare_target_) spare_[n] = 1;  // the pool refills from repaired nodes
    sim.SetNodeCondition(n, {});
  }
  while (phase_ != Phase::kDone && failures_.next().at <= now) {
    const FailureEvent e = failures_.next();
    failures_.Pop();
    Fail(now, e, sim);
  }
  if (slow_swap_at_ <= now) {
    slow_swap_at_ = kNever;
    if (phase_ == Phase::kRunning && slow_node_ != UINT32_MAX) {
      InterruptJob(now, {}, sim);  // at a checkpoint: nothing lost
      recover_at_ = now;           // already named: no detection to wait for
    }
  }
  if (recover_at_ <= now) {
    recover_at_ = kNever;
    Recover(now, sim);
  } else if (phase_ == Phase::kWaitingForNode && FindReplacements(now, sim)) {
    Restart(now, DownCause::kWaitForNode, sim);
  }
}

void GoodputLoop::Fail(Time now, const FailureEvent& e, SimControl& sim) {
  if (down_until_[e.node] > 0) return;  // out of service already
  const auto kind = static_cast<size_t>(e.kind);
  counts_.events[kind]++;
  const std::vector<size_t> jobs = sim.JobsOn(e.node);
  const bool hits_job = std::find(jobs.begin(), jobs.end(), job_) != jobs.end();
  if (hits_job) counts_.job_events[kind]++;
  if (e.kind == FailureKind::kSlowGpu && hits_job && phase_ == Phase::kRunning &&
      slow_node_ == UINT32_MAX) {
    Slow(now, e.node, sim);
    return;
  }
  const bool node_lost = e.kind != FailureKind::kSoftware;
  for (size_t j : jobs) {
    if (j != job_) {
      InterruptOther(now, j, sim);
    } else if (phase_ == Phase::kRunning || node_lost) {
      InterruptJob(now, node_lost ? std::vector<uint32_t>{e.node} : std::vector<uint32_t>{}, sim);
    }
  }
  if (node_lost) TakeOut(now, e.node, config_.rates.of(e.kind).repair, sim);
}

void GoodputLoop::TakeOut(Time now, uint32_t node, Duration repair, SimControl& sim) {
  if (down_until_[node] > 0) return;
  down_until_[node] = now + std::max<Duration>(repair, 1);
  repairs_.push({down_until_[node], node});
  spare_[node] = 0;
  sim.SetNodeCondition(node, kOutOfService);
}

void GoodputLoop::InterruptOther(Time now, size_t j, SimControl& sim) {
  const Time start = sim.RunStart(j), end = sim.RunEnd(j);
  if (end == kNever) return;
  const Duration lost = (now - start) % std::max<Duration>(config_.checkpoint_interval, 1);
  sim.Requeue(now, j, (end - now) + lost + config_.other_restore,
              config_.policy == RecoveryPolicy::kNaive);
  counts_.other_interruptions++;
}

void GoodputLoop::InterruptJob(Time now, const std::vector<uint32_t>& lost, SimControl& sim) {
  if (phase_ != Phase::kRunning && phase_ != Phase::kDetecting && phase_ != Phase::kWaitingForNode)
    return;
  ledger_.Interrupt(now);
  std::vector<uint32_t> gone = lost;
  const uint32_t slow = slow_node_;
  if (slow != UINT32_MAX) {
    // The restart's gang preflight finds the slow GPU: its node is swapped with the failed ones.
    gone.push_back(slow);
    slow_node_ = UINT32_MAX;
    slow_swap_at_ = kNever;
  }
  for (uint32_t n : gone) {
    for (size_t k = 0; k < gang_.tasks.size(); ++k) {
      if (gang_.tasks[k].node == n &&
          std::find(missing_.begin(), missing_.end(), k) == missing_.end()) {
        missing_.push_back(k);
      }
    }
  }
  Hold(now, sim);
  if (slow != UINT32_MAX) TakeOut(now, slow, config_.rates.of(FailureKind::kSlowGpu).repair, sim);
  if (phase_ == Phase::kRunning) {
    phase_ = Phase::kDetecting;
    recover_at_ = now + config_.detect;
  }
}

void GoodputLoop::Hold(Time now, SimControl& sim) {
  // Giving nodes back cannot fail.
  (void)sim.Reassign(now, job_, WithoutTasks(gang_, missing_), kNever);
}

void GoodputLoop::Recover(Time now, SimControl& sim) {
  if (phase_ != Phase::kDetecting) return;
  if (config_.policy == RecoveryPolicy::kNaive) {
    sim.Requeue(now, job_, config_.restore + ledger_.work() - ledger_.kept(), /*to_back=*/true);
    missing_.clear();
    phase_ = Phase::kQueued;
    return;
  }
  if (FindReplacements(now, sim)) {
    Restart(now, DownCause::kRecovery, sim);
  } else {
    phase_ = Phase::kWaitingForNode;
    counts_.waits++;
  }
}

bool GoodputLoop::FreeNode(const SimControl& sim, uint32_t n, size_t task) const {
  return down_until_[n] == 0 && !spare_[n] && sim.usage().node(n).condition.schedulable &&
         NodeTakesTask(sim.usage(), n, gang_, task);
}

bool GoodputLoop::FindReplacements(Time now, SimControl& sim) {
  std::vector<std::pair<size_t, uint32_t>> moves;
  std::vector<uint32_t> taken;
  int spares = 0;
  auto untaken = [&](uint32_t n) {
    return std::find(taken.begin(), taken.end(), n) == taken.end();
  };
  for (size_t k : missing_) {
    const uint32_t failed = gang_.tasks[k].node;
    std::optional<uint32_t> pick;
    if (config_.policy == RecoveryPolicy::kSpares) {
      // A spare runs opportunistic work, which makes way.
      pick = PickReplacement(topo_, failed, rule_, [&](uint32_t n) {
        return spare_[n] && down_until_[n] == 0 && untaken(n) &&
               topo_.nodes()[n].num_gpus == topo_.nodes()[failed].num_gpus;
      });
      if (pick) ++spares;
    }
    if (!pick) {
      pick = PickReplacement(topo_, failed, rule_,
                             [&](uint32_t n) { return untaken(n) && FreeNode(sim, n, k); });
    }
    if (!pick) return false;  // all or nothing: what was found stays free meanwhile
    moves.emplace_back(k, *pick);
    taken.push_back(*pick);
  }
  for (uint32_t n : taken) {
    if (!spare_[n]) continue;
    spare_[n] = 0;
    const std::vector<size_t> jobs = sim.JobsOn(n);
    if (!jobs.empty()) counts_.spare_evictions++;
    for (size_t j : jobs) InterruptOther(now, j, sim);
  }
  counts_.spares_taken += spares;
  counts_.free_nodes_taken += static_cast<int>(moves.size()) - spares;
  gang_ = MoveTasks(topo_, gang_, moves);
  missing_.clear();
  return true;
}

void GoodputLoop::Restart(Time now, DownCause why, SimControl& sim) {
  ledger_.Start(now + config_.replace, config_.restore, why);
  if (!sim.Reassign(now, job_, gang_, ledger_.DoneAt() - now).ok()) {
    // Not expected (FindReplacements checked every node): wait for nodes again.
    ledger_.Interrupt(now);
    phase_ = Phase::kWaitingForNode;
    return;
  }
  phase_ = Phase::kRunning;
}

void GoodputLoop::Slow(Time now, uint32_t node, SimControl& sim) {
  slow_node_ = node;
  ledger_.SetSpeed(now, config_.rates.slow_permille);
  (void)sim.Reassign(now, job_, gang_, ledger_.DoneAt() - now);  // the same nodes, a later end
  slow_swap_at_ = ledger_.NextCheckpointAfter(now + config_.straggler_detect);
}

void GoodputLoop::OnStart(Time now, size_t job, const cluster::GangAssignment& assignment) {
  if (job != job_) return;
  gang_ = assignment;
  missing_.clear();
  const bool first = ledger_.first_start() == kNever;
  ledger_.Start(now, first ? 0 : config_.restore, DownCause::kQueue);
  phase_ = Phase::kRunning;
}

void GoodputLoop::OnFinish(Time now, size_t job) {
  if (job != job_) return;
  ledger_.Finish(now);
  phase_ = Phase::kDone;
  job_end_ = now;
}

}  // namespace hangar::sim
