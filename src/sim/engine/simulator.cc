#include "sim/engine/simulator.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace hangar::sim {

StatusOr<std::unique_ptr<Simulator>> Simulator::Create(
    std::shared_ptr<const cluster::Topology> topo, const SimConfig& config) {
  HANGAR_ASSIGN_OR_RETURN(auto scheduler, sched::Scheduler::Create(config.scheduler));
  return std::unique_ptr<Simulator>(new Simulator(std::move(topo), config, std::move(scheduler)));
}

Simulator::Simulator(std::shared_ptr<const cluster::Topology> topo, SimConfig config,
                     std::unique_ptr<sched::Scheduler> scheduler)
    : topology_(topo),
      config_(std::move(config)),
      scheduler_(std::move(scheduler)),
      usage_(topo),
      pending_(scheduler_->queue_policy()),
      reshapes_(config_.mig_reshape_time),
      accounts_(config_.queues.get(), config_.share_half_life) {
  if (config_.gittins_ranks) {
    ranks_ = std::make_unique<RankKeeper>(config_.gittins, config_.gittins_by_predecessor);
  }
  if (config_.staging.enabled) {
    staging_ = std::make_unique<StagingModel>(config_.staging,
                                              static_cast<uint32_t>(topology_->nodes().size()));
  }
  for (uint32_t g = 0; g < config_.mig_layouts.size() && g < topology_->gpus().size(); ++g) {
    if (topology_->gpus()[g].mig)
      usage_.SetMigLayout(g, config_.mig_layouts[g], !config_.mig_reshape);
  }
}

void Simulator::AddJob(SimJob job) { jobs_.Add(std::move(job)); }

std::vector<size_t> Simulator::Arrivals() {
  std::vector<size_t> arrivals;
  for (size_t i = 0; i < jobs_.size(); ++i) {
    if (jobs_.spec(i).submit == kNever) {
      jobs_.at(i).held_back = true;
    } else {
      arrivals.push_back(i);
    }
  }
  std::stable_sort(arrivals.begin(), arrivals.end(), [&](size_t a, size_t b) {
    const SimJob &x = jobs_.spec(a), &y = jobs_.spec(b);
    return x.submit != y.submit ? x.submit < y.submit : x.seq < y.seq;
  });
  // The scheduler's `seq` is the submission order (a trace's rows need not be in time order), as
  // the controller's job ids are.
  for (size_t k = 0; k < arrivals.size(); ++k) jobs_.at(arrivals[k]).order = k + 1;
  return arrivals;
}

Status Simulator::Run() {
  HANGAR_RETURN_IF_ERROR(jobs_.Start(config_.queues.get()));
  pending_.Clear();
  running_.Reset(jobs_.size());
  grace_.Clear();
  HANGAR_RETURN_IF_ERROR(InternArtifacts());
  const std::vector<size_t> arrivals = Arrivals();
  if (ranks_) ranks_->Start(jobs_, arrivals);
  // Busy time counts from the first instant: an arrival, or what a Disruptor does first.
  Time first = arrivals.empty() ? kNever : jobs_.spec(arrivals[0]).submit;
  if (disruptor_) first = std::min(first, disruptor_->NextEvent());
  accounts_.Reset(first == kNever ? 0 : first);
  const size_t arriving = arrivals.size();
  size_t next = 0;
  while (true) {
    while (!completions_.empty() &&
           completions_.top().epoch != jobs_.at(completions_.top().job).epoch) {
      completions_.pop();
    }
    const bool have_arrival = next < arriving, have_completion = !completions_.empty();
    const Time disruption = disruptor_ ? disruptor_->NextEvent() : kNever;
    const Time stop = grace_.NextStop(), reshaped = reshapes_.NextDone();
    if (!have_arrival && !have_completion && stop == kNever && reshaped == kNever &&
        disruption == kNever)
      break;  // nothing arrives, ends, stops or is re-cut any more
    Time t = std::min({disruption, stop, reshaped});
    if (have_arrival) t = std::min(t, jobs_.spec(arrivals[next]).submit);
    if (have_completion) t = std::min(t, completions_.top().end);
    accounts_.Advance(t);
    while (!completions_.empty() && completions_.top().end <= t) {
      const Completion c = completions_.top();
      completions_.pop();
      if (c.epoch == jobs_.at(c.job).epoch) Finish(t, c.job);
    }
    for (size_t j; (j = grace_.PopDue(t)) != SIZE_MAX;) Stopped(j);
    reshapes_.Finish(t, usage_);
    while (next < arriving && jobs_.spec(arrivals[next]).submit <= t) Arrive(arrivals[next++]);
    if (disruptor_) Disrupt(t);
    // As in the controller: victims that stopped at once wait again in this instant's next cycle.
    while (Cycle(t)) {
    }
    if (observer_.on_wait) ReportWaits(t);
  }
  for (const auto& p : pending_.jobs()) jobs_.result(jobs_.IndexOf(p.id)).never = true;
  return Status::Ok();
}

void Simulator::Arrive(size_t j) {
  const SimJob& job = jobs_.spec(j);
  JobProgress& progress = jobs_.at(j);
  sched::PendingJob p;
  p.id = job.id;
  p.request = job.request.get();
  p.priority = job.priority;
  p.tier = job.tier;
  p.queue = job.queue;
  p.submit = job.submit;
  p.time_limit = job.time_limit;
  p.attained_service = progress.attained;
  p.seq = progress.order;
  p.rank = ranks_ ? ranks_->RankOf(jobs_, j, progress.ran) : 0;
  if (staging_ && config_.staging.data_aware && progress.artifact_set != UINT32_MAX) {
    p.staging_s = staging_->SecondsFor(progress.artifact_set);  // kept up to date before each cycle
  }
  if (config_.queues) {
    if (progress.ask_charge.empty())
      progress.ask_charge = config_.queues->Charge(*job.request, nullptr, *topology_);
    p.charge = &progress.ask_charge;
  }
  pending_.Insert(p);
  const bool first_arrival = jobs_.result(j).preemptions == 0;
  if (job.request->total_milli_gpu == 0 && first_arrival) pending_.CountCpuOnly(+1);
  if (config_.learn_profile && first_arrival) workload_.Add(*job.request);
}

Status Simulator::InternArtifacts() {
  prestaged_.clear();
  if (!staging_) return Status::Ok();
  for (size_t i = 0; i < jobs_.size(); ++i) {
    const SimJob& job = jobs_.spec(i);
    if (job.artifacts.empty()) continue;
    for (const auto& a : job.artifacts) {
      if (a.bytes <= 0) {
        return Status::InvalidArgument("job '" + job.name + "' needs object " +
                                       std::to_string(a.object) + " of " + std::to_string(a.bytes) +
                                       " bytes; sizes must be above 0");
      }
    }
    jobs_.at(i).artifact_set = staging_->Intern(job.artifacts);
  }
  return Status::Ok();
}

namespace {

std::vector<uint32_t> NodesOf(const cluster::GangAssignment& a) {
  std::vector<uint32_t> nodes;
  for (const auto& t : a.tasks) nodes.push_back(t.node);
  std::sort(nodes.begin(), nodes.end());
  nodes.erase(std::unique(nodes.begin(), nodes.end()), nodes.end());
  return nodes;
}

}  // namespace

Time Simulator::StageFor(Time now, size_t j, const cluster::GangAssignment& a) {
  const uint32_t set = jobs_.at(j).artifact_set;
  if (!staging_ || set == UINT32_MAX) return now;
  staging_->Unpin(PrestageOwner(j));  // its own pins below take over
  const Time ready = staging_->Stage(now, set, NodesOf(a), j, false);
  StagingStats& st = staging_->stats();
  st.starts_with_objects++;
  if (ready > now) st.staged_starts++;
  return ready;
}

void Simulator::PrestageOn(Time now, size_t j, const std::vector<uint32_t>& nodes) {
  staging_->Unpin(PrestageOwner(j));
  (void)staging_->Stage(now, jobs_.at(j).artifact_set, nodes, PrestageOwner(j), true);
}

void Simulator::Prestage(Time now, const sched::Decisions& d) {
  std::vector<size_t> keep;
  for (const auto& r : d.reservations) {
    const size_t j = jobs_.IndexOf(r.job);
    if (jobs_.at(j).artifact_set == UINT32_MAX) continue;
    PrestageOn(now, j, r.nodes);
    keep.push_back(j);
  }
  for (const auto& p : d.placements) {
    const size_t j = jobs_.IndexOf(p.job);
    // Started, or not nominated.
    if (!grace_.Awaits(j) || jobs_.at(j).artifact_set == UINT32_MAX) continue;
    PrestageOn(now, j, NodesOf(p.assignment));
    keep.push_back(j);
  }
  // A job no longer reserved keeps its pins only while it waits for its victims.
  for (size_t j : prestaged_) {
    if (std::find(keep.begin(), keep.end(), j) != keep.end()) continue;
    if (grace_.Awaits(j) && !running_.Find(j)) {
      keep.push_back(j);
      continue;
    }
    staging_->Unpin(PrestageOwner(j));
  }
  prestaged_ = std::move(keep);
}

void Simulator::RefreshRanks(Time now) {
  if (ranks_->due()) {
    // Jobs that have run and not finished are evidence too: they run at least this long.
    std::vector<sched::queue::GittinsRanker::AliveJob> alive;
    for (size_t k = 0; k < running_.seen().size(); ++k) {
      const size_t j = running_.info()[k].job;
      const sched::owner::RankClass c = ranks_->ClassOf(jobs_, j);
      alive.push_back({c.job_class, jobs_.at(j).ran + now - running_.seen()[k].start, c.parent});
    }
    auto add_if_ran = [&](size_t j) {
      const sched::owner::RankClass c = ranks_->ClassOf(jobs_, j);
      if (jobs_.at(j).ran > 0) alive.push_back({c.job_class, jobs_.at(j).ran, c.parent});
    };
    for (const auto& p : pending_.jobs()) add_if_ran(jobs_.IndexOf(p.id));
    // Victims still stopping have run too (the controller counts them among its waiting jobs).
    for (const auto& [j, run] : grace_.stopping()) add_if_ran(j);
    ranks_->Reestimate(alive);
  }
  const std::vector<size_t> reclassed = ranks_->TakeReclassed();
  if (!ranks_->NewVersion()) {
    // Only some jobs changed class: move each to its new place.
    for (size_t j : reclassed) {
      const size_t pos = pending_.Find(jobs_.spec(j).id);
      if (pos == pending_.size()) continue;  // started meanwhile
      pending_.jobs()[pos].rank = ranks_->RankOf(jobs_, j, jobs_.at(j).ran);
      pending_.Rekey(pos);
    }
    return;
  }
  pending_.RekeyAll([&](sched::PendingJob& p) {
    const size_t j = jobs_.IndexOf(p.id);
    p.rank = ranks_->RankOf(jobs_, j, jobs_.at(j).ran);
  });
}

sched::Snapshot Simulator::SnapshotAt(Time now) {
  // Running jobs' service so far is read only by LAS preemption, their rank only with a ranker.
  const bool las = scheduler_->config().preemption.mode == sched::PreemptionMode::kLas;
  for (size_t k = 0; (las || ranks_) && k < running_.seen().size(); ++k) {
    sched::RunningJob& r = running_.seen()[k];
    RunningInfo& info = running_.info()[k];
    r.attained_service = info.attained + info.milli * (now - r.start) / 1000;
    if (ranks_) r.rank = ranks_->RankOf(jobs_, info.job, info.ran + now - r.start, &info.rank);
  }
  if (staging_ && config_.staging.data_aware) staging_->Refresh();
  sched::Snapshot snap;
  snap.usage = &usage_;
  snap.pending = pending_.jobs();
  snap.running = running_.seen();
  snap.pending_presorted = true;
  // Each cycle draws from its snapshot's seed alone, which varies with the instant, as in the
  // controller.
  snap.random_seed = sched::owner::CycleSeed(config_.seed, now);
  snap.cpu_only_pending = pending_.cpu_only();
  snap.record_waiting = static_cast<bool>(observer_.on_wait);
  if (config_.learn_profile) snap.profile = workload_.profile();
  snap.windows = windows_;
  if (config_.queues) {
    snap.queues = config_.queues.get();
    if (config_.share_half_life > 0) snap.queue_history = accounts_.history();
  }
  return snap;
}

bool Simulator::Cycle(Time now) {
  StartPlanned(now);
  ReleaseHolds();
  if (pending_.empty()) return false;
  if (ranks_) RefreshRanks(now);
  sched::Decisions d = scheduler_->Cycle(SnapshotAt(now), now);
  accounts_.CountCycle();
  for (const auto& plan : d.mig_reshapes) reshapes_.Start(now, plan, usage_);
  std::vector<size_t> requeue;
  for (const auto& p : d.preemptions) Preempt(now, p, &requeue);
  Apply(now, d);
  for (size_t j : requeue) Arrive(j);  // after the placements: their indices name old positions
  if (staging_ && config_.staging.prestage) Prestage(now, d);
  if (observer_.on_wait) {
    // Reported once the instant has settled (ReportWaits), as the controller keeps a reason per
    // job: a job the cycle did not reach keeps its last reason, unless it never had one.
    for (auto& v : d.waiting) verdicts_[jobs_.IndexOf(v.job)] = std::move(v);
    for (sched::JobId id : d.unexamined) {
      const size_t j = jobs_.IndexOf(id);
      auto it = verdicts_.find(j);
      const sched::Rule had =
          it != verdicts_.end() ? it->second.reason.rule : jobs_.at(j).last_rule;
      if (had == sched::Rule::kNone) verdicts_[j] = {id, 0, d.not_examined, {}};
    }
  }
  if (observer_.on_cycle) observer_.on_cycle(now, accounts_.allocated_milli(), pending_.size());
  return !requeue.empty() ||
         !d.preemptions.empty();  // as the controller: another cycle for what settled
}

void Simulator::Apply(Time now, const sched::Decisions& d) {
  std::vector<size_t> started;
  for (const auto& p : d.placements) {
    const size_t j = jobs_.IndexOf(p.job);
    if (config_.preemption_grace > 0 && !p.preempted.empty()) {
      // It waits for its victims' GPUs, and preempts no one else meanwhile. What of its
      // placement is free now is held for it, so that nobody takes it while the victims stop.
      grace_.Await(j, static_cast<int>(p.preempted.size()));
      for (sched::JobId v : p.preempted) grace_.PreemptedFor(jobs_.IndexOf(v), j);
      pending_.jobs()[p.pending_index].may_preempt = false;
      planned_.HoldWhatIsFree(j, usage_, p.assignment);
      planned_.Plan(j, p);
      continue;
    }
    // Placed on GPUs that this cycle's victims still hold: it starts there once they have stopped.
    if (!Start(now, p, &started) && !d.preemptions.empty()) {
      int victims = 0;
      for (const auto& pre : d.preemptions) {
        const size_t v = jobs_.IndexOf(pre.victim);
        if (v == SIZE_MAX || !grace_.Stopping(v)) continue;
        grace_.AlsoWaitsFor(v, j);
        ++victims;
      }
      if (victims > 0) {
        grace_.Await(j, victims);
        pending_.jobs()[p.pending_index].may_preempt = false;
      }
      planned_.Plan(j, p);
    }
  }
  pending_.EraseAll(started);
}

void Simulator::ReportWaits(Time now) {
  for (auto& [j, v] : verdicts_) {  // in job order
    if (running_.Find(j) || jobs_.result(j).end != kNever || grace_.Stopping(j))
      continue;  // started since
    if (jobs_.at(j).last_rule == v.reason.rule) continue;
    jobs_.at(j).last_rule = v.reason.rule;
    observer_.on_wait(now, jobs_.spec(j), v);
  }
  verdicts_.clear();
}

bool Simulator::Start(Time now, const sched::Placement& p, std::vector<size_t>* started) {
  const size_t j = jobs_.IndexOf(p.job);
  const SimJob& job = jobs_.spec(j);
  const JobProgress& progress = jobs_.at(j);
  auto run = std::make_unique<Running>();
  run->job = j;
  run->start = now;
  run->assignment = p.assignment;
  run->milli = p.assignment.TotalMilliGpu(*topology_);
  Status s = usage_.Allocate(run->assignment);
  if (!s.ok()) return false;  // on GPUs that victims, stopping, still hold
  // It holds its GPUs from now and runs once its objects are on all its nodes.
  run->ready = StageFor(now, j, run->assignment);
  run->end = run->ready + progress.remaining;
  accounts_.Allocate(run->milli);
  if (config_.queues) {
    run->charge = config_.queues->Charge(*job.request, &run->assignment, *topology_);
    accounts_.Charge(job.queue, run->charge, Accounts::Charging::kAdd);
  }
  completions_.push({run->end, j, progress.epoch});
  SimJobResult& result = jobs_.result(j);
  result.first_start = std::min(result.first_start, now);
  if (job.request->total_milli_gpu == 0) pending_.CountCpuOnly(-1);
  sched::RunningJob r;
  r.id = job.id;
  r.request = job.request.get();
  r.assignment = &run->assignment;
  if (config_.queues) r.charge = &run->charge;  // the Running object stays put (held by pointer)
  r.priority = job.priority;
  r.tier = job.tier;
  r.queue = job.queue;
  r.start = now;
  r.expected_end = job.time_limit > 0 ? run->ready + job.time_limit : kNever;
  r.attained_service = progress.attained;
  r.last_checkpoint = now;
  r.min_run_time = job.min_run_time;
  r.seq = progress.order;
  const RunningInfo info{j, run->milli, progress.attained, progress.ran,
                         ranks_ ? ranks_->cached(j) : sched::owner::CachedRank{}};
  running_.Add(std::move(run), r, info);
  started->push_back(p.pending_index);
  if (observer_.on_start) observer_.on_start(now, job, p);
  return true;
}

void Simulator::Finish(Time now, size_t j) {
  Release(now, j);
  jobs_.at(j).remaining = 0;
  jobs_.result(j).end = now;
  if (ranks_) {
    // Its successor is ranked by another class from now on.
    if (const size_t s = ranks_->Finished(jobs_, j); s != SIZE_MAX) {
      if (const size_t pos = running_.PositionOf(s); pos != SIZE_MAX) {
        running_.info()[pos].rank.Invalidate();
      } else if (jobs_.spec(s).submit < now) {  // arrived, so waiting (a later one is ranked on
                                                // arrival)
        ranks_->Reclassed(s);
      }
    }
  }
  if (observer_.on_finish) observer_.on_finish(now, jobs_.spec(j));
}

void Simulator::Release(Time now, size_t j) {
  Running& run = *running_.Find(j);
  usage_.Release(run.assignment);
  accounts_.Free(run.milli);
  if (config_.queues)
    accounts_.Charge(jobs_.spec(j).queue, run.charge, Accounts::Charging::kRemove);
  // Staging is no service: it runs from `ready` on.
  const Time served_from = std::min(now, run.ready);
  JobProgress& progress = jobs_.at(j);
  progress.attained += run.milli * (now - served_from) / 1000;
  progress.ran += now - served_from;
  if (staging_) {
    staging_->Unpin(j);
    jobs_.result(j).staging += served_from - run.start;
    staging_->stats().staging_ms += served_from - run.start;
    staging_->stats().lost_gpu_ms += run.milli * (served_from - run.start) / 1000;
  }
  running_.Remove(j);
}

}  // namespace hangar::sim
