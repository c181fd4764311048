// ClusterState: one scheduling cycle and what follows a placement -- the job's tasks, their
// environment, and the launch commands.
#include <bit>

#include "cluster/mig_geometry.h"
#include "controller/state/cluster_state.h"
#include "controller/state/job_lifecycle.h"
#include "controller/state/launch_env.h"
#include "controller/state/run_as_message.h"

namespace hangar::controller {

using job::JobState;

namespace {

// What the cycle sees of waiting job `j` (its window, rank and staging are the caller's).
sched::PendingJob PendingOf(const JobRecord& j) {
  sched::PendingJob p;
  const job::JobSpec& s = j.spec->spec;
  p.id = j.id;
  p.request = j.request.get();
  p.priority = s.priority;
  p.tier = s.tier;
  p.submit = j.submitted;
  p.time_limit = s.time_limit;
  p.seq = j.id;
  p.queue = j.queue;
  p.may_preempt = j.awaiting_victims.empty();
  return p;
}

}  // namespace

void ClusterState::LearnFromHistory(bool ranked) {
  const bool link = ranked && options_.gittins_by_predecessor;
  for (auto it = jobs_.records().upper_bound(learning_.submitted_upto());
       it != jobs_.records().end(); ++it)
    learning_.Submitted(it->first, it->second.request.get(), link);
  learning_.Ended(queues_.attempts(), ranked, options_.gittins_by_predecessor,
                  [&](sched::JobId id) -> const sched::GangRequest* {
                    auto j = jobs_.records().find(id);
                    return j == jobs_.records().end() ? nullptr : j->second.request.get();
                  });
  learning_.Sweep(jobs_.waiting().size() + jobs_.active().size(),
                  [&](sched::JobId id) { return !jobs_.IsWaiting(id) && !jobs_.IsActive(id); });
}

// One cycle: its inputs gathered from the owners, the scheduler's decisions, and those applied.
void ClusterState::Schedule(Time now, Effects* fx) {
  dirty_ = false;
  if (jobs_.waiting().empty()) {
    ReleaseHolds();
    return;
  }
  UpdateShareHistory(now);
  RetryNodeWaits(now, fx);  // before the cycle, which could give a returning node away
  const sched::SchedulerConfig& cfg = scheduler_->config();
  const bool ranked =
      cfg.queue_policy == "gittins" || cfg.preemption.mode == sched::PreemptionMode::kGittins;
  LearnFromHistory(ranked);
  if (ranked && learning_.ranks().due()) ReestimateRanks(now);
  CycleInput in;
  GatherPending(now, ranked, &in, fx);
  // A preemptor whose victims have all stopped starts where the cycle that preempted for it placed
  // it, and so does a job that cycle placed on GPUs its victims still held; should that be
  // impossible now, what it held goes back to the pool and this cycle places it afresh.
  StartPlanned(now, fx, &in.pending, &in.cpu_only);
  ReleaseHolds();
  GatherRunning(now, ranked, &in);
  sched::Decisions d = scheduler_->Cycle(SnapshotOf(in, now), now);
  Apply(d, now, fx);
  TouchChangedReasons(in.shown);
}

void ClusterState::ReestimateRanks(Time now) {
  // Jobs that have run and not finished are evidence too: they run at least this long.
  std::vector<sched::queue::GittinsRanker::AliveJob> alive;
  for (const auto& [id, s] : learning_.services()) {
    auto it = jobs_.records().find(id);
    if (it == jobs_.records().end() || !it->second.request) continue;
    const JobRecord& j = it->second;
    const Duration ran =
        s.ran + (jobs_.IsActive(id) && j.started ? std::max<Time>(0, now - j.started) : 0);
    const sched::owner::RankClass c = learning_.ClassOf(id, *j.request);
    if (ran > 0) alive.push_back({c.job_class, ran, c.parent});
  }
  for (sched::JobId id : jobs_.active()) {
    const JobRecord& j = jobs_.at(id);
    const sched::owner::RankClass c = learning_.ClassOf(id, *j.request);
    if (!learning_.services().count(id) && j.started)
      alive.push_back({c.job_class, std::max<Time>(0, now - j.started), c.parent});
  }
  learning_.ranks().Reestimate(alive);
}

bool ClusterState::HeldBack(JobRecord& j) const {
  if (j.spec->unpinned) {  // its registry was down at submission: not placed until its tags are
                           // pinned
    if (j.reason_detail.empty())
      j.reason_detail =
          "staging: registry unreachable at submission; retrying to pin its image tags to "
          "digests";
    return true;
  }
  if (j.stopping_tasks > 0) {
    j.reason_detail = StoppingReason(j.stopping_tasks);
    return true;
  }
  if (const SparePool::NodeWait* w = spares_.WaitingForNode(j.id)) {
    j.reason_detail = "holding its healthy nodes until " + FormatUtcTimestamp(w->until) +
                      " for a node to replace " + topology_->nodes()[w->failed].name +
                      " (on_node_failure.wait_for_node); then it restarts there, or is placed "
                      "whole";
    return true;
  }
  return false;
}

void ClusterState::GatherPending(Time now, bool ranked, CycleInput* in, Effects* fx) {
  std::vector<sched::PendingJob>& pending = in->pending;
  pending.reserve(jobs_.waiting().size());
  std::unordered_map<uint64_t, int> array_running =
      !gates_.has_arrays() ? std::unordered_map<uint64_t, int>{} : RunningArrayElements();
  std::vector<std::pair<sched::JobId, std::string>> unmet;
  gates_.StartCount();
  std::vector<JobRecord*>& shown = in->shown;  // whose reasons this cycle may change
  shown.reserve(jobs_.waiting().size());
  for (sched::JobId id : jobs_.waiting()) {
    JobRecord& j = jobs_.at(id);
    shown.push_back(&j);
    const job::JobSpec& s = j.spec->spec;
    const bool begins_later = s.begin > now && !j.held;  // `begin:` (sbatch --begin)
    if (!s.after.empty()) gates_.AddDependent();
    if (begins_later) {  // not before then
      gates_.GatedUntil(s.begin);
      j.reason = {};
      j.reason_detail = "begins at " + FormatUtcTimestamp(s.begin) + " (its begin: time)";
      j.gated = true;
      continue;
    }
    if (j.held || j.gated || !s.after.empty() || j.array_id) {
      std::string never;
      if (!PassesGates(j, &array_running, &never)) {
        if (!never.empty()) unmet.emplace_back(id, std::move(never));
        continue;
      }
    }
    if (HeldBack(j)) continue;
    // Victims preempted for it that have stopped no longer hold it back.
    std::erase_if(j.awaiting_victims,
                  [&](sched::JobId v) { return !jobs_.IsActive(v) && !alloc_.StoppingOf(v); });
    sched::PendingJob p = PendingOf(j);
    if (!s.reservation.empty() && (p.window = reservations_.WindowOf(s.reservation)) < 0) {
      j.reason_detail = "runs inside reservation " + s.reservation +
                        ", which does not exist (it ended or was deleted): cancel the job, or "
                        "submit it again without `reservation`";
      continue;
    }
    if (JobLearning::Service* sv = learning_.Find(id)) {
      p.attained_service = sv->attained_gpu_ms;
      if (ranked) p.rank = learning_.RankOf(id, *j.request, sv->ran, sv);
    } else if (ranked) {
      p.rank = learning_.RankOf(id, *j.request, 0, &learning_.Of(id));
    }
    p.staging_s = StagingSeconds(j);
    in->cpu_only += j.request->total_milli_gpu == 0;
    pending.push_back(p);
  }
  for (const auto& [id, why] : unmet) EndUnmet(jobs_.at(id), why, now, fx);
}

// Running gangs, for backfill reservations (and preemption).
void ClusterState::GatherRunning(Time now, bool ranked, CycleInput* in) {
  std::vector<cluster::GangAssignment>& partial = in->partial;  // live tasks of partly ended gangs
  partial.reserve(jobs_.active().size());
  std::vector<sched::RunningJob>& running = in->running;
  running.reserve(jobs_.active().size());
  for (sched::JobId id : jobs_.active()) {
    const JobRecord& j = jobs_.at(id);
    if (j.tasks.empty()) continue;
    sched::RunningJob r;
    r.id = id;
    r.request = j.request.get();
    r.priority = j.spec->spec.priority;
    r.tier = j.spec->spec.tier;
    r.start = j.started ? j.started : now;
    r.expected_end = j.spec->spec.time_limit > 0 ? r.start + j.spec->spec.time_limit : kNever;
    r.min_run_time = j.spec->spec.min_run_time;
    r.last_checkpoint = std::max(r.start, j.last_checkpoint);
    r.queue = j.queue;
    r.seq = id;
    {
      JobLearning::Service& sv = learning_.Of(id);
      r.attained_service = sched::owner::AttainedService(sv.attained_gpu_ms,
                                                         j.request->total_milli_gpu, r.start, now);
      if (ranked) r.rank = learning_.RankOf(id, *j.request, sv.ran + now - r.start, &sv);
    }
    if (j.live_tasks == j.tasks.size()) {
      r.assignment = &j.assignment;
    } else {
      cluster::GangAssignment live;
      for (const auto& t : j.tasks) {
        if (t.phase == TaskRun::Phase::kEnded) continue;
        cluster::GangAssignment one = cluster::TaskShare(j.assignment, t.index);
        one.tasks[0].first_grant = static_cast<uint32_t>(live.grants.size());
        live.grants.insert(live.grants.end(), one.grants.begin(), one.grants.end());
        one.tasks[0].end_grant = static_cast<uint32_t>(live.grants.size());
        live.tasks.push_back(one.tasks[0]);
      }
      partial.push_back(std::move(live));
      r.assignment = &partial.back();
    }
    running.push_back(r);
  }
}

sched::Snapshot ClusterState::SnapshotOf(CycleInput& in, Time now) {
  sched::Snapshot snap;
  snap.usage = &alloc_.usage();
  snap.pending = in.pending;
  snap.running = in.running;
  snap.random_seed = sched::owner::CycleSeed(options_.seed, now - options_.seed_epoch);
  snap.cpu_only_pending = in.cpu_only;
  snap.windows = reservations_.windows();
  // The hot spares as one more window, for ever open, that only opportunistic jobs may use.
  std::vector<sched::NodeWindow>& with_spares = in.windows;
  if (spares_.count() > 0) {
    with_spares.assign(snap.windows.begin(), snap.windows.end());
    sched::NodeWindow spares{"hot spares", 0, kNever, {}, true};
    for (uint32_t n = 0; n < nodes_.size(); ++n) {
      if (spares_.IsSpare(n)) spares.nodes.push_back(n);
    }
    with_spares.push_back(std::move(spares));
    snap.windows = with_spares;
  }
  if (options_.learn_profile) snap.profile = learning_.workload().profile();
  if (!queues_.trivial()) {
    snap.queues = &queues_.tree();
    snap.queue_history = queues_.history();
  }
  return snap;
}

void ClusterState::Apply(sched::Decisions& d, Time now, Effects* fx) {
  SendMigReshapes(d.mig_reshapes, now, fx);
  jobs_.waiting_order().jobs.clear();
  jobs_.waiting_order().reserved_start.clear();
  for (const auto& v : d.waiting) jobs_.waiting_order().jobs.push_back(v.job);
  jobs_.waiting_order().jobs.insert(jobs_.waiting_order().jobs.end(), d.unexamined.begin(),
                                    d.unexamined.end());
  for (const auto& r : d.reservations) jobs_.waiting_order().reserved_start[r.job] = r.start;

  // Preemptions first: a victim is asked to checkpoint and stop, and keeps its GPUs until it has;
  // the job it made room for starts in a later cycle, once they are free, and preempts no more
  // meanwhile.
  for (const auto& pre : d.preemptions) {
    JobRecord& victim = jobs_.at(pre.victim);
    fx->Event(now, "job", "job/" + std::to_string(pre.victim),
              "preempted for job " + std::to_string(pre.for_job) + ": " + pre.why);
    Requeue(victim, "preempted for job " + std::to_string(pre.for_job) + ": " + pre.why, now, fx);
    const std::string prefix = std::to_string(pre.victim) + ".";
    for (auto& [task, z] : alloc_.stopping()) {
      if (task.compare(0, prefix.size(), prefix) == 0 && z.held_for == 0) z.held_for = pre.for_job;
    }
  }
  for (auto& p : d.placements) {
    JobRecord& j = jobs_.at(p.job);
    if (!p.preempted.empty()) {
      j.awaiting_victims.insert(p.preempted.begin(), p.preempted.end());
      // Hold the part of its placement that is free now, so that nobody (a victim requeued, a
      // smaller job backfilling) takes it while the victims stop; the victims' GPUs join the hold
      // as they are freed (EndZombie).
      alloc_.planned().HoldWhatIsFree(j.id, alloc_.usage(), p.assignment);
      std::vector<uint32_t> nodes;
      for (const auto& t : p.assignment.tasks) nodes.push_back(t.node);
      PreStage(j, nodes, fx);  // its image is warm by the time the victims have stopped
      alloc_.planned().Plan(j.id, p);
      j.reason = {};
      j.reason_detail = "waiting for " + std::to_string(p.preempted.size()) + " preempted job" +
                        (p.preempted.size() == 1 ? "" : "s") + " to checkpoint and stop";
      continue;
    }
    sched::Placement plan = d.preemptions.empty() ? sched::Placement{} : p;
    StartJob(j, p, now, fx);
    // The cycle counts a victim's GPUs free at once; here they stay held until it has stopped,
    // so a job placed on them starts there in a later cycle, once they are free.
    if (j.state == JobState::kPending) {
      j.reason = {};
      j.reason_detail = "waiting for preempted jobs to checkpoint and stop";
      if (!d.preemptions.empty()) {
        // It waits, where it was placed, for this cycle's victims to stop (as a preemptor does).
        for (const auto& pre : d.preemptions) j.awaiting_victims.insert(pre.victim);
        alloc_.planned().Plan(j.id, std::move(plan));
      }
    }
  }
  for (const auto& r : d.reservations) {
    if (auto it = jobs_.records().find(r.job); it != jobs_.records().end())
      PreStage(it->second, r.nodes, fx);
  }
  for (auto& v : d.waiting) {
    JobRecord& j = jobs_.at(v.job);
    j.reason = v.reason;
    j.reason_detail = std::move(v.detail);
    if (j.reason_detail.empty() && !j.awaiting_victims.empty()) {
      j.reason_detail =
          "waiting for " + std::to_string(j.awaiting_victims.size()) +
          " preempted job(s) to checkpoint and stop; then: " + v.reason.ToString(*topology_);
    }
  }
  for (sched::JobId id : d.unexamined) {
    // Jobs the cycle did not reach keep their last reason, unless they never had one.
    JobRecord& j = jobs_.at(id);
    if (j.reason.rule == sched::Rule::kNone) j.reason = d.not_examined;
  }
}

void ClusterState::StartPlanned(Time now, Effects* fx, std::vector<sched::PendingJob>* pending,
                                int32_t* cpu_only) {
  using Due = sched::owner::PlannedStarts::Due;
  alloc_.planned().StartDue(
      alloc_.usage(),
      [&](sched::JobId id) {
        auto jt = jobs_.records().find(id);
        if (jt == jobs_.records().end() || jt->second.state != JobState::kPending) {
          // Replaced in place: its old tasks still stop, and its plan waits for them.
          return HoldsForReplacement(id) ? Due::kWait : Due::kDrop;
        }
        const JobRecord& j = jt->second;
        return !j.awaiting_victims.empty() || j.stopping_tasks > 0 ? Due::kWait : Due::kStart;
      },
      [&](sched::JobId id, sched::Placement& p) {
        JobRecord& j = jobs_.at(id);
        bool usable = true;
        for (const auto& t : p.assignment.tasks) {
          const cluster::NodeCondition& c = alloc_.usage().node(t.node).condition;
          usable &= nodes_[t.node].connected && c.schedulable &&
                    (c.gangs_allowed || p.assignment.tasks.size() == 1);
        }
        for (const auto& g : p.assignment.grants) usable &= alloc_.usage().gpu_available(g.gpu);
        if (!usable) return;
        StartJob(j, p, now, fx);
        if (j.state == JobState::kPending) return;
        spares_.Started(j.id);  // a replacement in place, if it was one, has started
        std::erase_if(*pending, [&](const sched::PendingJob& q) { return q.id == j.id; });
        *cpu_only -= j.request->total_milli_gpu == 0;
      });
}

void ClusterState::StartJob(JobRecord& j, sched::Placement& p, Time now, Effects* fx) {
  if (!alloc_.usage().Allocate(p.assignment).ok())
    return;  // cannot happen: the cycle planned on alloc_.usage()
  jobs_.Activate(j.id);
  j.assignment = std::move(p.assignment);
  j.locality = p.locality;
  j.backfilled = p.backfilled;
  j.borrowing = p.borrowing;
  j.tasks.clear();
  for (uint32_t k = 0; k < j.assignment.tasks.size(); ++k) {
    TaskRun t;
    t.index = k;
    t.node = j.assignment.tasks[k].node;
    j.tasks.push_back(t);
  }
  j.live_tasks = j.tasks.size();
  jobs_.Move(j, JobState::kStarting, "placement");
  j.reason = {};
  j.reason_detail.clear();
  j.awaiting_victims.clear();
  j.master_port =
      options_.master_port_base +
      static_cast<int>((j.id * 7 + j.attempt) % static_cast<uint64_t>(options_.master_port_span));
  ++placements_total_;
  std::string where;
  for (const auto& t : j.tasks) {
    const std::string& n = topology_->nodes()[t.node].name;
    if (where.find(n) == std::string::npos) where += (where.empty() ? "" : ",") + n;
  }
  fx->Event(now, "job", "job/" + std::to_string(j.id),
            "placed (attempt " + std::to_string(j.attempt) + ") on " + where + ", locality " +
                std::string(cluster::LevelName(p.locality)));
  goodput_.Placed(j.id, j.attempt, j.assignment.TotalMilliGpu(*topology_),
                  !j.spec->spec.progress.empty(), now);
  Persist(j, fx);
  j.stage_asked.clear();
  if (!StartStaging(j, now, fx)) LaunchAll(j, fx);
}

void ClusterState::LaunchAll(const JobRecord& j, Effects* fx) const {
  LaunchContext ctx;
  ctx.job_id = j.id;
  ctx.attempt = j.attempt;
  ctx.restarts = j.restarts;
  ctx.spec = &j.spec->spec;
  ctx.assignment = &j.assignment;
  ctx.topology = topology_.get();
  ctx.address_of = [this](uint32_t n) {
    return nodes_[n].address.empty() ? topology_->nodes()[n].name : nodes_[n].address;
  };
  ctx.master_port = j.master_port;
  ctx.checkpoint_dir = options_.checkpoint_root + "/job-" + std::to_string(j.id);
  ctx.array_id = j.array_id;
  ctx.array_index = j.array_index;
  auto envs = TaskEnvironments(ctx);
  for (const auto& t : j.tasks) {
    if (t.phase == TaskRun::Phase::kLaunching) SendLaunch(j, t, envs[t.index], fx);
  }
}

void ClusterState::SendLaunch(const JobRecord& j, const TaskRun& t,
                              const std::map<std::string, std::string>& env, Effects* fx) const {
  const cluster::TaskPlacement& task = j.assignment.tasks[t.index];
  pb::ControllerMessage m;
  pb::Launch* l = m.mutable_launch();
  l->set_task_id(TaskId(j.id, j.attempt, t.index));
  l->set_job_id(j.id);
  l->set_attempt(j.attempt);
  l->set_task_index(t.index);
  for (const auto& a : j.spec->spec.tasks[task.group].command) l->add_argv(a);
  for (const auto& [k, v] : env) (*l->mutable_env())[k] = v;
  for (const auto& g : j.assignment.GrantsOf(task)) {
    l->add_gpu_indices(topology_->gpus()[g.gpu].index);
    if (g.mig_start < 0) continue;
    const auto& shape = cluster::ShapeInfo(static_cast<cluster::MigShape>(g.mig_shape));
    pb::MigInstance* mi = l->add_mig_instances();
    mi->set_gpu_index(topology_->gpus()[g.gpu].index);
    mi->set_profile(j.spec->spec.tasks[task.group].gpu.mig_profile);
    mi->set_start(static_cast<uint32_t>(g.mig_start));
    mi->set_memory_slices(static_cast<uint32_t>(shape.memory_slices));
    mi->set_compute_slices(static_cast<uint32_t>(shape.compute_slices));
  }
  l->set_milli_cpu(task.milli_cpu);
  l->set_memory_mib(task.memory_mib);
  l->set_checkpoint_signal(j.spec->spec.checkpoint.signal);
  l->set_tty(j.spec->spec.terminal);  // an interactive job's terminal (docs/interactive.md)
  l->set_stdin_pipe(j.spec->spec.stdin_open && !j.spec->spec.terminal);
  if (RunsPreflight(j)) {  // docs/goodput.md, "Gang preflight"
    auto master = env.find("MASTER_ADDR");
    AskPreflight(j, t, master == env.end() ? topology_->nodes()[task.node].name : master->second,
                 l);
  }
  const job::TaskGroupSpec& group = j.spec->spec.tasks[task.group];
  l->set_workdir(group.workdir);
  for (const auto& v : TaskArtifacts(j, t.index)) {
    pb::ArtifactMount* a = l->add_artifacts();
    a->set_digest(v.object->digest);
    a->set_path(v.path);
  }
  if (!group.container.empty()) {
    pb::Container* c = l->mutable_container();
    c->set_image(group.container.image);
    c->set_shm_size_mib(group.container.shm_size_mib);
    for (const auto& m : group.container.mounts) {
      pb::Mount* pm = c->add_mounts();
      pm->set_host(m.host);
      pm->set_path(m.path);
      pm->set_read_only(m.read_only);
    }
    // The agent checks each source again, where its links lead, as the task's user.
    for (const auto& a : options_.mounts_allowed) c->add_mounts_allowed(a);
  }
  // Who it runs as; without (--auth none), the agent's own user. The agent runs nothing as root
  // unless told that the queue allows it.
  if (const job::RunAs& who = j.spec->spec.run_as; !who.empty()) {
    FillRunAs(who, queues_.AllowsRoot(j.spec->spec.queue), l->mutable_run_as());
  }
  fx->messages.push_back({topology_->nodes()[t.node].name, std::move(m)});
}

}  // namespace hangar::controller
