#include "sim/engine/simulator.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <numeric>

#include "sched/mig_reshape.h"
#include "sched/owner/share_history.h"

namespace hangar::sim {

StatusOr<std::unique_ptr<Simulator>> Simulator::Create(
    std::shared_ptr<const cluster::Topology> topo, const SimConfig& config) {
  HANGAR_ASSIGN_OR_RETURN(auto scheduler, sched::Scheduler::Create(config.scheduler));
  return std::unique_ptr<Simulator>(new Simulator(std::move(topo), config, std::move(scheduler)));
}

Simulator::Simulator(std::shared_ptr<const cluster::Topology> topo, SimConfig config,
                     std::unique_ptr<sched::Scheduler> scheduler)
    : topology_(topo), config_(std::move(config)), scheduler_(std::move(scheduler)), usage_(topo) {
  if (config_.gittins_ranks) {
    ranker_ = std::make_unique<sched::owner::RankBook>(config_.gittins);
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

// The owner's side of a MIG reshape: the GPU takes its new layout at once, and no task until the
// reshape's time has passed.
void Simulator::Reshape(Time now, const sched::MigReshapePlan& plan) {
  usage_.SetMigLayout(plan.gpu, plan.after);
  usage_.SetMigReshaping(plan.gpu, true);
  reshapes_.push({now + config_.mig_reshape_time, plan.gpu});
  ++mig_stats_.reshapes;
  mig_stats_.instances_created += std::popcount(sched::MigStartsToCreate(plan.before, plan.after));
  mig_stats_.instances_destroyed +=
      std::popcount(sched::MigStartsToDestroy(plan.before, plan.after));
}

void Simulator::AddJob(SimJob job) { jobs_.push_back(std::move(job)); }

Status Simulator::Run() {
  const size_t n = jobs_.size();
  results_.assign(n, {});
  remaining_.resize(n);
  attained_.assign(n, 0);
  ran_.assign(n, 0);
  rank_cache_.assign(n, {});
  ask_charge_.assign(n, {});
  epoch_.assign(n, 0);
  last_rule_.assign(n, sched::Rule::kNone);
  running_slots_.clear();
  running_slots_.resize(n);
  running_pos_.assign(n, SIZE_MAX);
  index_of_.clear();
  const sched::queue::QueueTree* tree = config_.queues.get();
  if (tree) {
    queue_usage_.assign(tree->nodes().size(), std::vector<int64_t>(tree->dims(), 0));
    queue_history_.assign(tree->nodes().size(), std::vector<double>(tree->dims(), 0.0));
    queue_gpu_ms_.assign(tree->nodes().size(), 0);
  }
  for (size_t i = 0; i < n; ++i) {
    remaining_[i] = jobs_[i].runtime;
    if (!jobs_[i].request)
      return Status::InvalidArgument("job '" + jobs_[i].name + "' has no request");
    if (tree && (jobs_[i].queue >= tree->nodes().size() || !tree->nodes()[jobs_[i].queue].leaf())) {
      return Status::InvalidArgument("job '" + jobs_[i].name + "' names queue " +
                                     std::to_string(jobs_[i].queue) +
                                     ", which is not a leaf queue");
    }
    if (!index_of_.emplace(jobs_[i].id, i).second) {
      return Status::InvalidArgument("two jobs have id " + std::to_string(jobs_[i].id));
    }
  }
  HANGAR_RETURN_IF_ERROR(InternArtifacts());
  held_back_.assign(n, 0);
  std::vector<size_t> arrivals;  // the jobs not held back
  for (size_t i = 0; i < n; ++i) {
    if (jobs_[i].submit == kNever) {
      held_back_[i] = 1;
    } else {
      arrivals.push_back(i);
    }
  }
  std::stable_sort(arrivals.begin(), arrivals.end(), [&](size_t a, size_t b) {
    return jobs_[a].submit != jobs_[b].submit ? jobs_[a].submit < jobs_[b].submit
                                              : jobs_[a].seq < jobs_[b].seq;
  });
  // The scheduler's `seq` is the submission order (a trace's rows need not be in time order), as
  // the controller's job ids are.
  order_.assign(n, 0);
  for (size_t k = 0; k < arrivals.size(); ++k) order_[arrivals[k]] = k + 1;
  prev_.assign(n, SIZE_MAX);
  next_.assign(n, SIZE_MAX);
  reclassed_.clear();
  if (ranker_ && config_.gittins_by_predecessor) {
    std::unordered_map<uint64_t, size_t> last;  // per shape, in submission order
    for (size_t j : arrivals) {
      auto [it, fresh] = last.emplace(jobs_[j].request->fingerprint, j);
      if (!fresh) {
        prev_[j] = it->second;
        next_[it->second] = j;
        it->second = j;
      }
    }
  }
  // Busy time counts from the first instant: an arrival, or what a Disruptor does first.
  Time first = arrivals.empty() ? kNever : jobs_[arrivals[0]].submit;
  if (disruptor_) first = std::min(first, disruptor_->NextEvent());
  last_account_ = first == kNever ? 0 : first;
  const size_t arriving = arrivals.size();
  size_t next = 0;
  while (true) {
    while (!completions_.empty() && completions_.top().epoch != epoch_[completions_.top().job]) {
      completions_.pop();
    }
    const bool have_arrival = next < arriving, have_completion = !completions_.empty();
    const Time disruption = disruptor_ ? disruptor_->NextEvent() : kNever;
    if (!have_arrival && !have_completion && stops_.empty() && reshapes_.empty() &&
        disruption == kNever)
      break;
    Time t = disruption;
    if (have_arrival) t = std::min(t, jobs_[arrivals[next]].submit);
    if (have_completion) t = std::min(t, completions_.top().end);
    if (!stops_.empty()) t = std::min(t, stops_.top().end);
    if (!reshapes_.empty()) t = std::min(t, reshapes_.top().first);
    AccountBusy(t);
    while (!completions_.empty() && completions_.top().end <= t) {
      const Completion c = completions_.top();
      completions_.pop();
      if (c.epoch == epoch_[c.job]) Finish(t, c.job);
    }
    while (!stops_.empty() && stops_.top().end <= t) {
      const size_t j = stops_.top().job;
      stops_.pop();
      Stopped(j);
    }
    while (!reshapes_.empty() && reshapes_.top().first <= t) {
      usage_.SetMigReshaping(reshapes_.top().second, false);
      reshapes_.pop();
    }
    while (next < arriving && jobs_[arrivals[next]].submit <= t) Arrive(arrivals[next++]);
    if (disruptor_) Disrupt(t);
    // As in the controller: victims that stopped at once wait again in this instant's next cycle.
    while (Cycle(t)) {
    }
    if (observer_.on_wait) ReportWaits(t);
  }
  for (const auto& p : pending_) results_[index_of_[p.id]].never = true;
  return Status::Ok();
}

void Simulator::AccountBusy(Time now) {
  if (now > last_account_) {
    const Duration dt = now - last_account_;
    busy_gpu_ms_ += allocated_milli_ * dt / 1000;
    if (config_.queues) {
      for (size_t q = 0; q < queue_usage_.size(); ++q)
        queue_gpu_ms_[q] += queue_usage_[q][sched::queue::kGpu] * dt / 1000;
      if (config_.share_half_life > 0) {
        sched::owner::DecayShareHistory(queue_history_, queue_usage_, dt, config_.share_half_life);
      }
    }
  }
  last_account_ = std::max(last_account_, now);
}

void Simulator::ChargeQueue(size_t j, const std::vector<int64_t>& charge, Charging how) {
  const int sign = static_cast<int>(how);
  const auto& nodes = config_.queues->nodes();
  for (int q = static_cast<int>(jobs_[j].queue); q >= 0; q = nodes[q].parent) {
    for (size_t d = 0; d < charge.size(); ++d) queue_usage_[q][d] += sign * charge[d];
  }
}

void Simulator::Arrive(size_t j) {
  const SimJob& job = jobs_[j];
  sched::PendingJob p;
  p.id = job.id;
  p.request = job.request.get();
  p.priority = job.priority;
  p.tier = job.tier;
  p.queue = job.queue;
  p.submit = job.submit;
  p.time_limit = job.time_limit;
  p.attained_service = attained_[j];
  p.seq = order_[j];
  p.rank = RankOf(j, ran_[j], &rank_cache_[j]);
  if (staging_ && config_.staging.data_aware && set_of_[j] != UINT32_MAX) {
    p.staging_s = staging_->SecondsFor(set_of_[j]);  // kept up to date before each cycle
  }
  if (config_.queues) {
    if (ask_charge_[j].empty())
      ask_charge_[j] = config_.queues->Charge(*job.request, nullptr, *topology_);
    p.charge = &ask_charge_[j];
  }
  const sched::queue::OrderKey key = scheduler_->queue_policy().Key(p);
  auto it = std::upper_bound(pending_keys_.begin(), pending_keys_.end(), key);
  const size_t pos = static_cast<size_t>(it - pending_keys_.begin());
  pending_keys_.insert(it, key);
  pending_.insert(pending_.begin() + static_cast<ptrdiff_t>(pos), p);
  if (job.request->total_milli_gpu == 0 && results_[j].preemptions == 0) cpu_only_pending_++;
  if (config_.learn_profile && results_[j].preemptions == 0) workload_.Add(*job.request);
}

Status Simulator::InternArtifacts() {
  set_of_.assign(jobs_.size(), UINT32_MAX);
  prestaged_.clear();
  if (!staging_) return Status::Ok();
  for (size_t i = 0; i < jobs_.size(); ++i) {
    if (jobs_[i].artifacts.empty()) continue;
    for (const auto& a : jobs_[i].artifacts) {
      if (a.bytes <= 0) {
        return Status::InvalidArgument("job '" + jobs_[i].name + "' needs object " +
                                       std::to_string(a.object) + " of " + std::to_string(a.bytes) +
                                       " bytes; sizes must be above 0");
      }
    }
    set_of_[i] = staging_->Intern(jobs_[i].artifacts);
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
  if (!staging_ || set_of_[j] == UINT32_MAX) return now;
  staging_->Unpin(PrestageOwner(j));  // its own pins below take over
  const Time ready = staging_->Stage(now, set_of_[j], NodesOf(a), j, false);
  StagingStats& st = staging_->stats();
  st.starts_with_objects++;
  if (ready > now) st.staged_starts++;
  return ready;
}

void Simulator::PrestageOn(Time now, size_t j, const std::vector<uint32_t>& nodes) {
  staging_->Unpin(PrestageOwner(j));
  (void)staging_->Stage(now, set_of_[j], nodes, PrestageOwner(j), true);
}

void Simulator::Prestage(Time now, const sched::Decisions& d) {
  std::vector<size_t> keep;
  for (const auto& r : d.reservations) {
    const size_t j = index_of_[r.job];
    if (set_of_[j] == UINT32_MAX) continue;
    PrestageOn(now, j, r.nodes);
    keep.push_back(j);
  }
  for (const auto& p : d.placements) {
    const size_t j = index_of_[p.job];
    if (!awaiting_.count(j) || set_of_[j] == UINT32_MAX) continue;  // started, or not nominated
    PrestageOn(now, j, NodesOf(p.assignment));
    keep.push_back(j);
  }
  // A job no longer reserved keeps its pins only while it waits for its victims.
  for (size_t j : prestaged_) {
    if (std::find(keep.begin(), keep.end(), j) != keep.end()) continue;
    if (awaiting_.count(j) && !running_slots_[j]) {
      keep.push_back(j);
      continue;
    }
    staging_->Unpin(PrestageOwner(j));
  }
  prestaged_ = std::move(keep);
}

Simulator::RankClass Simulator::ClassOf(size_t j) const {
  const uint64_t shape = jobs_[j].request->fingerprint;
  const size_t p = prev_.empty() ? SIZE_MAX : prev_[j];
  if (p == SIZE_MAX || results_[p].end == kNever) return {shape, 0};
  return sched::owner::ClassByPredecessor(shape, ran_[p]);
}

int64_t Simulator::RankOf(size_t j, Duration age, CachedRank* cache) {
  if (!ranker_) return 0;
  if (ranker_->Holds(*cache, age)) return cache->rank;
  return ranker_->RankOf(ClassOf(j), age, jobs_[j].request->total_milli_gpu, cache);
}

void Simulator::RefreshRanks(Time now) {
  if (ranker_->due()) {
    // Jobs that have run and not finished are evidence too: they run at least this long.
    std::vector<sched::queue::GittinsRanker::AliveJob> alive;
    for (size_t k = 0; k < running_jobs_.size(); ++k) {
      const sched::RunningJob& r = running_jobs_[k];
      const size_t j = running_info_[k].job;
      const RankClass c = ClassOf(j);
      alive.push_back({c.job_class, ran_[j] + now - r.start, c.parent});
    }
    for (const auto& p : pending_) {
      const size_t j = index_of_[p.id];
      const RankClass c = ClassOf(j);
      if (ran_[j] > 0) alive.push_back({c.job_class, ran_[j], c.parent});
    }
    // Victims still stopping have run too (the controller counts them among its waiting jobs).
    for (const auto& [j, run] : stopping_) {
      const RankClass c = ClassOf(j);
      if (ran_[j] > 0) alive.push_back({c.job_class, ran_[j], c.parent});
    }
    ranker_->Reestimate(alive);
  }
  if (ranker_->version() == ranked_version_) {
    // Only some jobs changed class: move each to its new place.
    for (size_t j : reclassed_) {
      size_t i = 0;
      while (i < pending_.size() && pending_[i].id != jobs_[j].id) ++i;
      if (i == pending_.size()) continue;  // started meanwhile
      sched::PendingJob p = pending_[i];
      pending_.erase(pending_.begin() + static_cast<ptrdiff_t>(i));
      pending_keys_.erase(pending_keys_.begin() + static_cast<ptrdiff_t>(i));
      p.rank = RankOf(j, ran_[j], &rank_cache_[j]);
      const sched::queue::OrderKey key = scheduler_->queue_policy().Key(p);
      const auto at = std::upper_bound(pending_keys_.begin(), pending_keys_.end(), key);
      const ptrdiff_t pos = at - pending_keys_.begin();
      pending_keys_.insert(at, key);
      pending_.insert(pending_.begin() + pos, p);
    }
    reclassed_.clear();
    return;
  }
  reclassed_.clear();
  ranked_version_ = ranker_->version();
  std::vector<std::pair<sched::queue::OrderKey, sched::PendingJob>> keyed;
  keyed.reserve(pending_.size());
  for (sched::PendingJob& p : pending_) {
    const size_t j = index_of_[p.id];
    p.rank = RankOf(j, ran_[j], &rank_cache_[j]);
    keyed.emplace_back(scheduler_->queue_policy().Key(p), p);
  }
  std::sort(keyed.begin(), keyed.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  for (size_t i = 0; i < keyed.size(); ++i) {
    pending_keys_[i] = keyed[i].first;
    pending_[i] = keyed[i].second;
  }
}

bool Simulator::Cycle(Time now) {
  StartPlanned(now);
  ReleaseHolds();
  if (pending_.empty()) return false;
  if (ranker_) RefreshRanks(now);
  // Running jobs' service so far is read only by LAS preemption, their rank only with a ranker.
  const bool las = scheduler_->config().preemption.mode == sched::PreemptionMode::kLas;
  for (size_t k = 0; (las || ranker_) && k < running_jobs_.size(); ++k) {
    sched::RunningJob& r = running_jobs_[k];
    RunningInfo& info = running_info_[k];
    r.attained_service = info.attained + info.milli * (now - r.start) / 1000;
    if (ranker_) r.rank = RankOf(info.job, info.ran + now - r.start, &info.rank);
  }
  if (staging_ && config_.staging.data_aware) staging_->Refresh();
  sched::Snapshot snap;
  snap.usage = &usage_;
  snap.pending = pending_;
  snap.running = running_jobs_;
  snap.pending_presorted = true;
  // Each cycle draws from its snapshot's seed alone, which varies with the instant, as in the
  // controller.
  snap.random_seed = sched::owner::CycleSeed(config_.seed, now);
  snap.cpu_only_pending = cpu_only_pending_;
  snap.record_waiting = static_cast<bool>(observer_.on_wait);
  if (config_.learn_profile) snap.profile = workload_.profile();
  snap.windows = windows_;
  if (config_.queues) {
    snap.queues = config_.queues.get();
    if (config_.share_half_life > 0) snap.queue_history = queue_history_;
  }
  sched::Decisions d = scheduler_->Cycle(snap, now);

  ++cycles_;
  for (const auto& plan : d.mig_reshapes) Reshape(now, plan);
  std::vector<size_t> requeue;
  for (const auto& p : d.preemptions) Preempt(now, p, &requeue);
  std::vector<size_t> started;
  for (const auto& p : d.placements) {
    const size_t j = index_of_[p.job];
    if (config_.preemption_grace > 0 && !p.preempted.empty()) {
      // It waits for its victims' GPUs, and preempts no one else meanwhile. What of its
      // placement is free now is held for it, so that nobody takes it while the victims stop.
      awaiting_[j] = static_cast<int>(p.preempted.size());
      for (sched::JobId v : p.preempted) {
        const size_t vj = index_of_[v];
        if (!stopping_for_.count(vj)) stopping_for_[vj] = j;
      }
      pending_[p.pending_index].may_preempt = false;
      planned_.HoldWhatIsFree(j, usage_, p.assignment);
      planned_.Plan(j, p);
      continue;
    }
    // Placed on GPUs that this cycle's victims still hold: it starts there once they have stopped.
    if (!Start(now, p, &started) && !d.preemptions.empty()) {
      int victims = 0;
      for (const auto& pre : d.preemptions) {
        auto v = index_of_.find(pre.victim);
        if (v == index_of_.end() || !stopping_.count(v->second)) continue;
        also_waiting_[v->second].push_back(j);
        ++victims;
      }
      if (victims > 0) {
        awaiting_[j] = victims;
        pending_[p.pending_index].may_preempt = false;
      }
      planned_.Plan(j, p);
    }
  }
  if (!started.empty()) {
    std::vector<uint8_t> gone(pending_.size(), 0);
    size_t w = pending_.size();  // the first position that goes: the ones before it stay put
    for (size_t pos : started) {
      gone[pos] = 1;
      w = std::min(w, pos);
    }
    for (size_t r = w; r < pending_.size(); ++r) {
      if (gone[r]) continue;
      pending_[w] = pending_[r];
      pending_keys_[w] = pending_keys_[r];
      ++w;
    }
    pending_.resize(w);
    pending_keys_.resize(w);
  }
  for (size_t j : requeue) Arrive(j);  // after the placements: their indices name old positions
  if (staging_ && config_.staging.prestage) Prestage(now, d);
  if (observer_.on_wait) {
    // Reported once the instant has settled (ReportWaits), as the controller keeps a reason per
    // job: a job the cycle did not reach keeps its last reason, unless it never had one.
    for (auto& v : d.waiting) verdicts_[index_of_[v.job]] = std::move(v);
    for (sched::JobId id : d.unexamined) {
      const size_t j = index_of_[id];
      auto it = verdicts_.find(j);
      const sched::Rule had = it != verdicts_.end() ? it->second.reason.rule : last_rule_[j];
      if (had == sched::Rule::kNone) verdicts_[j] = {id, 0, d.not_examined, {}};
    }
  }
  if (observer_.on_cycle) observer_.on_cycle(now, allocated_milli_, pending_.size());
  return !requeue.empty() ||
         !d.preemptions.empty();  // as the controller: another cycle for what settled
}

void Simulator::ReportWaits(Time now) {
  for (auto& [j, v] : verdicts_) {  // in job order
    if (running_slots_[j] || results_[j].end != kNever || stopping_.count(j))
      continue;  // started since
    if (last_rule_[j] == v.reason.rule) continue;
    last_rule_[j] = v.reason.rule;
    observer_.on_wait(now, jobs_[j], v);
  }
  verdicts_.clear();
}

bool Simulator::Start(Time now, const sched::Placement& p, std::vector<size_t>* started) {
  const size_t j = index_of_[p.job];
  auto run = std::make_unique<Running>();
  run->job = j;
  run->start = now;
  run->assignment = p.assignment;
  run->milli = p.assignment.TotalMilliGpu(*topology_);
  Status s = usage_.Allocate(run->assignment);
  if (!s.ok()) return false;  // on GPUs that victims, stopping, still hold
  // It holds its GPUs from now and runs once its objects are on all its nodes.
  run->ready = StageFor(now, j, run->assignment);
  run->end = run->ready + remaining_[j];
  allocated_milli_ += run->milli;
  if (config_.queues) {
    run->charge = config_.queues->Charge(*jobs_[j].request, &run->assignment, *topology_);
    ChargeQueue(j, run->charge, Charging::kAdd);
  }
  completions_.push({run->end, j, epoch_[j]});
  results_[j].first_start = std::min(results_[j].first_start, now);
  if (jobs_[j].request->total_milli_gpu == 0) cpu_only_pending_--;
  sched::RunningJob r;
  r.id = jobs_[j].id;
  r.request = jobs_[j].request.get();
  r.assignment = &run->assignment;
  if (config_.queues) r.charge = &run->charge;  // the Running object stays put (held by pointer)
  r.priority = jobs_[j].priority;
  r.tier = jobs_[j].tier;
  r.queue = jobs_[j].queue;
  r.start = now;
  r.expected_end = jobs_[j].time_limit > 0 ? run->ready + jobs_[j].time_limit : kNever;
  r.attained_service = attained_[j];
  r.last_checkpoint = now;
  r.min_run_time = jobs_[j].min_run_time;
  r.seq = order_[j];
  running_pos_[j] = running_jobs_.size();
  running_jobs_.push_back(r);
  running_info_.push_back({j, run->milli, attained_[j], ran_[j], rank_cache_[j]});
  running_slots_[j] = std::move(run);
  started->push_back(p.pending_index);
  if (observer_.on_start) observer_.on_start(now, jobs_[j], p);
  return true;
}

void Simulator::Finish(Time now, size_t j) {
  Release(now, j);
  remaining_[j] = 0;
  results_[j].end = now;
  if (ranker_) {
    const RankClass k = ClassOf(j);
    ranker_->Finished(k, ran_[j]);
    // Its successor is ranked by another class from now on.
    if (const size_t s = next_[j]; s != SIZE_MAX && results_[s].end == kNever) {
      rank_cache_[s].Invalidate();
      if (running_pos_[s] != SIZE_MAX) {
        running_info_[running_pos_[s]].rank.Invalidate();
      } else if (jobs_[s].submit < now) {  // arrived, so waiting (a later one is ranked on arrival)
        reclassed_.push_back(s);
      }
    }
  }
  if (observer_.on_finish) observer_.on_finish(now, jobs_[j]);
}

void Simulator::Release(Time now, size_t j) {
  Running& run = *running_slots_[j];
  usage_.Release(run.assignment);
  allocated_milli_ -= run.milli;
  if (config_.queues) ChargeQueue(j, run.charge, Charging::kRemove);
  // Staging is no service: it runs from `ready` on.
  const Time served_from = std::min(now, run.ready);
  attained_[j] += run.milli * (now - served_from) / 1000;
  ran_[j] += now - served_from;
  if (staging_) {
    staging_->Unpin(j);
    results_[j].staging += served_from - run.start;
    staging_->stats().staging_ms += served_from - run.start;
    staging_->stats().lost_gpu_ms += run.milli * (served_from - run.start) / 1000;
  }
  const size_t pos = running_pos_[j];
  running_jobs_[pos] = running_jobs_.back();
  running_info_[pos] = running_info_.back();
  running_pos_[running_info_[pos].job] = pos;
  running_jobs_.pop_back();
  running_info_.pop_back();
  running_pos_[j] = SIZE_MAX;
  running_slots_[j].reset();
}

}  // namespace hangar::sim
