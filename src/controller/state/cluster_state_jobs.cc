// ClusterState: jobs -- submission, cancellation, how tasks end, requeueing -- and their views.
#include <algorithm>
#include <cstring>

#include "controller/state/cluster_state.h"
#include "controller/state/job_lifecycle.h"
#include "job/gpu_proportions.h"
#include "job/gpu_type_names.h"
#include "sched/placement/gang_placer.h"

namespace hangar::controller {

using job::JobState;

ClusterState::ClusterState(std::shared_ptr<const cluster::Topology> topology,
                           ControllerOptions options, std::unique_ptr<sched::Scheduler> scheduler)
    : topology_(std::move(topology)),
      options_(std::move(options)),
      scheduler_(std::move(scheduler)),
      alloc_(topology_),
      health_(
          topology_,
          [&] {
            health::HealthOptions h = options_.health;
            h.subjects.require_validation = options_.require_validation;
            return h;
          }(),
          0),
      nodes_(topology_->nodes().size()) {
  health_.SetBaselines(options_.baselines);
  if (options_.data_token.empty()) options_.data_token = NewDataToken();  // for agents' data ports
  std::vector<job::QueueSpec> specs;
  for (const auto& name : options_.queues) {
    job::QueueSpec q;
    q.name = name;
    specs.push_back(q);
  }
  auto tree = sched::queue::QueueTree::Build(specs, *topology_);
  if (tree.ok()) UseQueues(std::move(specs), *tree);
  for (uint32_t n = 0; n < nodes_.size(); ++n) UpdateCondition(n);
}

std::string ClusterState::TaskId(sched::JobId job, uint32_t attempt, uint32_t index) {
  return std::to_string(job) + "." + std::to_string(attempt) + "." + std::to_string(index);
}

bool ClusterState::ParseTaskId(const std::string& id, sched::JobId* job, uint32_t* attempt,
                               uint32_t* index) {
  unsigned long long j = 0;
  unsigned a = 0, i = 0;
  char tail = 0;
  if (std::sscanf(id.c_str(), "%llu.%u.%u%c", &j, &a, &i, &tail) != 3) return false;
  *job = j;
  *attempt = a;
  *index = i;
  return true;
}

void ClusterState::ReplaceSpec(JobRecord& j, std::shared_ptr<const SpecEntry> entry, Effects* fx) {
  Specs().Ref(entry->key, entry->spec.user, static_cast<int64_t>(entry->stored->size()));
  if (Specs().Unref(j.spec->key)) fx->batch.erased_specs.push_back(j.spec->key);
  j.spec = std::move(entry);
}

Status ClusterState::MayStoreSpec(const SpecEntry& entry) {
  return Specs().MayStore(entry.spec.user, entry.key, static_cast<int64_t>(entry.stored->size()));
}

Status ClusterState::MayQueue(const std::string& user, long count) const {
  const long cap = options_.max_queued_per_user;
  // Every pending job at most is this user's: counting them is needed only past the cap.
  if (static_cast<long>(jobs_.waiting().size()) + count <= cap) return Status::Ok();
  long mine = 0;
  for (sched::JobId id : jobs_.waiting()) {
    auto it = jobs_.records().find(id);
    if (it != jobs_.records().end() && it->second.spec->spec.user == user) ++mine;
  }
  if (mine + count <= cap) return Status::Ok();
  return Status::ResourceExhausted(
      user + " has " + std::to_string(mine) + " jobs pending and may have at most " +
      std::to_string(cap) + " (the controller's --max-queued-per-user)" +
      (count > 1 ? ", so " + std::to_string(count) + " more do not fit" : "") +
      "; wait for some to start or cancel some (hangar cancel), or ask an admin to raise the cap");
}

StatusOr<sched::GangRequest> ClusterState::Admissible(const job::JobSpec& spec,
                                                      int* leaf_out) const {
  const int leaf = queues_.tree().FindLeaf(spec.queue);
  if (leaf < 0) {
    std::string known;
    for (const auto& q : queues_.tree().LeafNames()) known += (known.empty() ? "" : ", ") + q;
    return Status::InvalidArgument("queue '" + spec.queue + "' " +
                                   (queues_.tree().Find(spec.queue) >= 0
                                        ? "is a group, not a queue jobs can go to"
                                        : "does not exist") +
                                   "; the queues are: " + known);
  }
  if (spec.run_as.IsRoot() && !queues_.AllowsRoot(spec.queue)) {
    return Status::PermissionDenied(
        "job '" + spec.name + "' would run as root (" + spec.run_as.Describe() + ") and queue '" +
        spec.queue +
        "' does not allow root tasks; submit with a token mapped to another account, "
        "or ask an admin to set allow_root: true on the queue (docs/queues.md)");
  }
  HANGAR_RETURN_IF_ERROR(CheckDependenciesAtSubmit(spec.after));
  if (!spec.reservation.empty())
    HANGAR_RETURN_IF_ERROR(reservations_.MayUse(spec.reservation, spec.user, spec.queue));
  HANGAR_RETURN_IF_ERROR(sched::CheckNodeNames(spec.nodes, *topology_));
  HANGAR_ASSIGN_OR_RETURN(sched::GangRequest request, sched::CompileGang(spec, *topology_));
  const sched::Reason never = scheduler_->NeverReason(*topology_, request);
  if (never.rule != sched::Rule::kNone) {
    std::string why = never.ToString(*topology_);
    if (why.rfind("never: ", 0) == 0) why.erase(0, 7);  // the sentence says "never" already
    return Status::OutOfRange("job '" + spec.name + "' can never run on this cluster: " + why +
                              "; change the request and submit it again");
  }
  *leaf_out = leaf;
  return request;
}

sched::JobId ClusterState::Admit(std::shared_ptr<const SpecEntry> spec,
                                 std::shared_ptr<const sched::GangRequest> request, int leaf,
                                 Time now, Effects* fx, uint64_t array_id, int64_t array_index) {
  JobRecord j;
  j.id = jobs_.TakeId();
  j.spec = std::move(spec);
  j.request = std::move(request);
  j.submitted = now;
  JobLifecycle::Admit(j);
  j.queue = static_cast<uint32_t>(leaf);
  j.array_id = array_id;
  j.array_index = array_index;
  if (!j.spec->spec.after.empty()) gates_.AddDependent();
  fx->Event(now, "job", "job/" + std::to_string(j.id),
            "submitted '" + j.spec->spec.name + "' to queue " + j.spec->spec.queue +
                (array_id ? " as element " + std::to_string(array_index) + " of array " +
                                std::to_string(array_id)
                          : ""));
  if (j.spec->spec.hold) {  // `hold: true` (sbatch --hold): held from the start
    j.held = true;
    j.held_by = j.spec->spec.user;
    fx->Event(now, "job", "job/" + std::to_string(j.id),
              "held by " + j.held_by + " at submission (hold: true)");
  }
  const sched::JobId id = j.id;
  Specs().Ref(j.spec->key, j.spec->spec.user, static_cast<int64_t>(j.spec->stored->size()));
  auto& stored = jobs_.Add(std::move(j));
  Persist(stored, fx);
  dirty_ = true;
  return id;
}

StatusOr<sched::JobId> ClusterState::Submit(job::JobSpec spec, Time now, Effects* fx) {
  HANGAR_RETURN_IF_ERROR(job::ResolveGpuTypes(options_.gpu_types, *topology_, &spec));
  HANGAR_RETURN_IF_ERROR(job::ApplyGpuModelLimits(options_.gpu_models, *topology_, &spec));
  if (!spec.array.empty()) {
    HANGAR_ASSIGN_OR_RETURN(std::vector<sched::JobId> ids, SubmitArray(std::move(spec), now, fx));
    return ids.front();
  }
  int leaf = 0;
  HANGAR_ASSIGN_OR_RETURN(sched::GangRequest request, Admissible(spec, &leaf));
  std::string json = job::JobSpecToJson(spec).dump();
  auto entry = jobs_.interned().Spec(std::move(json), std::move(spec), options_.sealer.get());
  HANGAR_RETURN_IF_ERROR(MayStoreSpec(*entry));
  const sched::JobId id =
      Admit(std::move(entry), jobs_.interned().Request(std::move(request)), leaf, now, fx);
  fx->batch.values.push_back({"meta", "next_job_id", std::to_string(jobs_.next_id()), false});
  return id;
}

StatusOr<std::optional<nlohmann::json>> ClusterState::RecallSubmission(
    const std::string& user, const std::string& key, const SubmissionDigest& request,
    Time now) const {
  return idempotency_.Recall(user, key, request, now);
}

void ClusterState::RememberSubmission(const std::string& user, const std::string& key,
                                      const SubmissionDigest& request, const nlohmann::json& answer,
                                      Time now, Effects* fx) {
  idempotency_.Remember(user, key, request, answer, now, &fx->batch.values);
}

Status ClusterState::Cancel(sched::JobId id, Time now, Effects* fx) {
  auto it = jobs_.records().find(id);
  if (it == jobs_.records().end())
    return Status::NotFound("job " + std::to_string(id) +
                            " does not exist; `hangar jobs` lists them");
  JobRecord& j = it->second;
  if (job::IsFinal(j.state)) {
    return Status::FailedPrecondition("job " + std::to_string(id) + " already " +
                                      std::string(job::JobStateName(j.state)) +
                                      "; nothing to cancel");
  }
  // A pending job's cancel frees nothing: it needs a cycle only when the last one reserved nodes
  // for it (EASY backfill), when jobs may depend on it, or when it waited for preemption victims.
  // Without this every cancel at 100,000 queued jobs waited behind a 100 ms cycle.
  const bool was_pending = jobs_.IsWaiting(id);
  const bool matters = !was_pending || jobs_.waiting_order().reserved_start.count(id) ||
                       gates_.with_dependencies() > 0 || !j.awaiting_victims.empty() ||
                       alloc_.planned().planned(id);
  CloseAttempt(j, now, 0, "cancelled", fx);
  if (!j.tasks.empty())
    StopTasks(j, std::max(options_.stop_grace, j.spec->spec.checkpoint.grace), fx);
  jobs_.Move(j, JobState::kCancelled, "cancel");
  j.ended = now;
  j.message = "cancelled";
  fx->Event(now, "job", "job/" + std::to_string(id), "cancelled");
  Persist(j, fx);
  if (matters) dirty_ = true;
  return Status::Ok();
}

void ClusterState::EnforceTimeLimits(Time now, Effects* fx) {
  std::vector<sched::JobId> over;
  for (sched::JobId id : jobs_.active()) {
    const JobRecord& j = jobs_.at(id);
    const Duration limit = j.spec->spec.time_limit;
    if (limit <= 0 || !j.started ||
        (j.state != JobState::kRunning && j.state != JobState::kStarting))
      continue;
    if (now - j.started >= limit) over.push_back(id);
  }
  for (sched::JobId id : over) TimeOut(jobs_.at(id), now, fx);
}

void ClusterState::TimeOut(JobRecord& j, Time now, Effects* fx) {
  const job::CheckpointSpec& ckpt = j.spec->spec.checkpoint;
  StopWithCheckpointSignal(j, fx);
  CloseAttempt(j, now, 0, "timed_out", fx);
  jobs_.Move(j, JobState::kTimedOut, "time limit");
  j.ended = now;
  j.message = "time limit " + FormatDuration(j.spec->spec.time_limit) + " reached: sent " +
              job::SignalName(ckpt.signal) + ", then SIGTERM after at most " +
              FormatDuration(ckpt.grace) + " and SIGKILL " + FormatDuration(options_.stop_grace) +
              " later";
  fx->Event(now, "job", "job/" + std::to_string(j.id), "timed out: " + j.message);
  Persist(j, fx);
  dirty_ = true;
}

void ClusterState::StopWithCheckpointSignal(const JobRecord& j, Effects* fx) {
  const job::CheckpointSpec& ckpt = j.spec->spec.checkpoint;
  // As for a preemption: the checkpoint signal, the job's grace to write one (ended early by
  // `hangar checkpoint-done` or its exit), then SIGTERM and, after the stop grace, SIGKILL.
  for (const auto& t : j.tasks) {
    if (t.phase == TaskRun::Phase::kEnded) continue;
    pb::ControllerMessage m;
    m.mutable_stop()->set_task_id(TaskId(j.id, j.attempt, t.index));
    m.mutable_stop()->set_grace_ms(ckpt.grace);
    m.mutable_stop()->set_checkpoint_signal(ckpt.signal);
    m.mutable_stop()->set_kill_grace_ms(options_.stop_grace);
    fx->messages.push_back({topology_->nodes()[t.node].name, std::move(m)});
  }
}

void ClusterState::StopTasks(JobRecord& j, Duration grace, Effects* fx) {
  for (const auto& t : j.tasks) {
    if (t.phase == TaskRun::Phase::kEnded) continue;
    pb::ControllerMessage m;
    m.mutable_stop()->set_task_id(TaskId(j.id, j.attempt, t.index));
    m.mutable_stop()->set_grace_ms(grace);
    fx->messages.push_back({topology_->nodes()[t.node].name, std::move(m)});
  }
}

void ClusterState::EndTask(JobRecord& j, TaskRun& t, Time now, Effects* fx) {
  jobs_.TouchView(j.id);
  (void)now;
  (void)fx;
  if (t.phase == TaskRun::Phase::kEnded) return;
  t.phase = TaskRun::Phase::kEnded;
  alloc_.usage().Release(cluster::TaskShare(j.assignment, t.index));
  if (j.live_tasks > 0 && --j.live_tasks == 0) jobs_.Deactivate(j.id);
  dirty_ = true;
}

void ClusterState::FinishIfDone(JobRecord& j, Time now, Effects* fx) {
  if (j.state != JobState::kStarting && j.state != JobState::kRunning &&
      j.state != JobState::kPreempting)
    return;
  for (const auto& t : j.tasks) {
    if (t.phase != TaskRun::Phase::kEnded || t.lost || t.stopped) continue;
    if (t.exit_code != 0 || t.signal != 0) {
      jobs_.Move(j, JobState::kFailed, "a task failed");
      j.ended = now;
      j.message = "task " + std::to_string(t.index) +
                  (t.signal ? " was killed by signal " + std::to_string(t.signal)
                            : " exited with code " + std::to_string(t.exit_code)) +
                  (t.message.empty() ? "" : ": " + t.message);
      StopTasks(j, options_.stop_grace, fx);
      CloseAttempt(j, now, 0, "failed", fx);
      fx->Event(now, "job", "job/" + std::to_string(j.id), "failed: " + j.message);
      Persist(j, fx);
      return;
    }
  }
  if (j.live_tasks > 0) return;
  jobs_.Move(j, JobState::kSucceeded, "every task succeeded");
  j.ended = now;
  j.message = "all " + std::to_string(j.tasks.size()) + " tasks exited 0";
  CloseAttempt(j, now, 0, "succeeded", fx);
  fx->Event(now, "job", "job/" + std::to_string(j.id), "succeeded");
  Persist(j, fx);
}

void ClusterState::Requeue(JobRecord& j, const std::string& why, Time now, Effects* fx,
                           bool checkpoint, Then then) {
  jobs_.TouchView(j.id);
  const Duration grace = checkpoint ? j.spec->spec.checkpoint.grace : options_.stop_grace;
  // The work since its last checkpoint is lost (as far as anyone knows now).
  const int64_t lost =
      j.started ? j.assignment.TotalMilliGpu(*topology_) *
                      std::max<Time>(0, now - std::max(j.started, j.last_checkpoint)) / 1000
                : 0;
  goodput_.WillRequeue(j.id, why);
  CloseAttempt(j, now, lost, "requeued", fx);
  for (auto& t : j.tasks) {
    if (t.phase == TaskRun::Phase::kEnded) continue;
    if (nodes_[t.node].lost) {
      // It may still run there, until the node's lease runs out and its fence stops it: the next
      // attempt waits for that, as for a task being stopped.
      if (const Time fence = FenceEnd(t.node); fence > now) {
        alloc_.Stop(TaskId(j.id, j.attempt, t.index), t.node,
                    cluster::TaskShare(j.assignment, t.index), fence);
        j.stopping_tasks++;
        continue;
      }
      t.lost = true;
      EndTask(j, t, now, fx);
      continue;
    }
    // Still running on a healthy node: stop it, and keep its GPUs until it has ended.
    const std::string id = TaskId(j.id, j.attempt, t.index);
    pb::ControllerMessage m;
    m.mutable_stop()->set_task_id(id);
    m.mutable_stop()->set_grace_ms(grace);
    if (checkpoint) {
      m.mutable_stop()->set_checkpoint_signal(j.spec->spec.checkpoint.signal);
      m.mutable_stop()->set_kill_grace_ms(options_.stop_grace);
    }
    fx->messages.push_back({topology_->nodes()[t.node].name, std::move(m)});
    alloc_.Stop(id, t.node, cluster::TaskShare(j.assignment, t.index));
    j.stopping_tasks++;
  }
  jobs_.Deactivate(j.id);
  j.tasks.clear();
  j.assignment = {};
  j.live_tasks = 0;
  // While tasks of this attempt still stop (their checkpoint grace, a lost node's fence) the job is
  // preempting: it holds those GPUs and is not placed again; it is pending once the last one has
  // ended (ZombieEnded).
  const bool stopping = j.stopping_tasks > 0 && job::HoldsResources(j.state);
  jobs_.Move(j, stopping ? JobState::kPreempting : JobState::kPending, "requeue");
  j.attempt++;
  j.restarts++;
  j.started = 0;
  j.message = why;
  j.reason = {};
  j.reason_detail = stopping ? StoppingReason(j.stopping_tasks) : "";
  j.idle_since = 0;
  j.idle_notified = false;
  j.idle_gpu_ms = 0;
  j.staging_ms = j.staging_gpu_ms = 0;
  j.staging_waiting.clear();
  fx->Event(now, "job", "job/" + std::to_string(j.id),
            (then == Then::kInPlace   ? "stopped to restart in place: "
             : then == Then::kHolding ? "stopped, its healthy nodes held: "
                                      : "requeued whole: ") +
                why);
  Persist(j, fx);
  dirty_ = true;
}

void ClusterState::EndZombie(Allocations::StoppingTasks::iterator z) {
  const sched::JobId for_job = z->second.held_for;
  const JobRecord* p = for_job ? jobs_.Find(for_job) : nullptr;
  const bool keep = p && ((p->state == JobState::kPending && !p->awaiting_victims.empty()) ||
                          HoldsForReplacement(for_job));
  ZombieEnded(
      alloc_.EndStopping(z, keep ? Allocations::ShareTo::kHolder : Allocations::ShareTo::kPool));
}

void ClusterState::ReleaseHolds() {
  alloc_.ReleaseHolds([&](sched::JobId id) {
    const JobRecord& p = jobs_.at(id);
    return (p.state == JobState::kPending && !p.awaiting_victims.empty()) ||
           HoldsForReplacement(id);
  });
}

void ClusterState::ZombieEnded(const std::string& task_id) {
  sched::JobId id;
  uint32_t attempt, index;
  if (!ParseTaskId(task_id, &id, &attempt, &index)) return;
  auto it = jobs_.records().find(id);
  if (it == jobs_.records().end() || it->second.stopping_tasks == 0) return;
  JobRecord& j = it->second;
  // The last task of a requeued attempt has stopped: the job may be placed again. (Its stored row
  // still says preempting until it is next written; a restore reads that as pending.)
  if (--j.stopping_tasks == 0 && j.state == JobState::kPreempting) {
    jobs_.Move(j, JobState::kPending, "previous attempt stopped");
    j.reason_detail.clear();
  }
}

Status ClusterState::OnCheckpointDone(const std::string& node, const pb::CheckpointDone& c,
                                      Time now, Effects* fx) {
  // Only the node that runs the task may vouch for its checkpoint (it moves the job's lost-work
  // mark and, during a preemption, ends the grace).
  HANGAR_RETURN_IF_ERROR(CheckTaskOwner(node, c.task_id()));
  sched::JobId id;
  uint32_t attempt, index;
  if (!ParseTaskId(c.task_id(), &id, &attempt, &index)) return Status::Ok();
  auto it = jobs_.records().find(id);
  if (it == jobs_.records().end()) return Status::Ok();
  if (it->second.attempt != attempt && !alloc_.stopping().count(c.task_id()))
    return Status::Ok();  // an old attempt's news
  JobRecord& j = it->second;
  const std::string step = c.step() ? " (step " + std::to_string(c.step()) + ")" : "";
  if (!c.drain_error().empty()) {
    // Written to the node's scratch but not drained to the shared store: not durable,
    // so the lost-work mark stays at the last checkpoint that is.
    fx->Event(now, "job", "job/" + std::to_string(id),
              "checkpoint of task " + std::to_string(index) + " on " + node + step +
                  " is NOT durable: " + c.drain_error() +
                  "; a restart resumes from the previous checkpoint in the store");
    return Status::Ok();
  }
  j.last_checkpoint = now;
  j.checkpoint_path = c.path();
  goodput_.Checkpoint(id, attempt, now);
  fx->Event(
      now, "job", "job/" + std::to_string(id),
      "checkpoint written by task " + std::to_string(index) + " on " + node +
          (c.path().empty() ? "" : ": " + c.path()) + step +
          (c.drained() ? ", drained to the shared store in " + std::to_string(c.drain_ms()) + " ms"
                       : ""));
  Persist(j, fx);
  ReplaceStragglerAtCheckpoint(j, now, fx);
  return Status::Ok();
}

void ClusterState::Persist(const JobRecord& j, Effects* fx) const {
  fx->batch.jobs.push_back(ToRow(j));
}

JobRow ClusterState::ToRow(const JobRecord& j) const {
  JobRow r;
  r.id = j.id;
  r.name = j.spec->spec.name;
  r.queue = j.spec->spec.queue;
  r.user = j.spec->spec.user;
  r.state = std::string(job::JobStateName(j.state));
  r.spec_key = j.spec->key;
  r.spec = j.spec->stored;
  r.submitted = j.submitted;
  r.started = j.started;
  r.ended = j.ended;
  r.attempt = j.attempt;
  r.restarts = j.restarts;
  r.message = j.message;
  r.placement_json = PlacementJson(j);
  nlohmann::json extra = nlohmann::json::object();
  if (j.last_checkpoint) extra["last_checkpoint"] = j.last_checkpoint;
  if (!j.checkpoint_path.empty()) extra["checkpoint_path"] = j.checkpoint_path;
  if (j.idle_gpu_ms) extra["idle_gpu_ms"] = j.idle_gpu_ms;
  if (j.staging_ms) extra["staging_ms"] = j.staging_ms;
  if (j.staging_gpu_ms) extra["staging_gpu_ms"] = j.staging_gpu_ms;
  if (j.array_id) {
    extra["array_id"] = j.array_id;
    extra["array_index"] = j.array_index;
  }
  if (j.held) extra["held_by"] = j.held_by;
  if (auto g = goodput_.Stored(j.id); !g.is_null()) extra["goodput"] = std::move(g);
  if (!extra.empty()) r.extra_json = extra.dump();
  return r;
}

std::string ClusterState::PlacementJson(const JobRecord& j) const {
  if (j.tasks.empty()) return "";
  nlohmann::json tasks = nlohmann::json::array();
  for (const auto& t : j.tasks) {
    const auto& task = j.assignment.tasks[t.index];
    nlohmann::json grants = nlohmann::json::array();
    for (const auto& g : j.assignment.GrantsOf(task)) {
      nlohmann::json grant = {topology_->gpus()[g.gpu].index, g.milli, g.memory_mib};
      if (g.mig_start >= 0) grant.insert(grant.end(), {g.mig_start, g.mig_shape});  // MIG placement
      grants.push_back(std::move(grant));
    }
    tasks.push_back({{"index", t.index},
                     {"group", task.group},
                     {"replica", task.replica},
                     {"node", topology_->nodes()[t.node].name},
                     {"cpu", task.milli_cpu},
                     {"memory", task.memory_mib},
                     {"grants", grants},
                     {"ended", t.phase == TaskRun::Phase::kEnded},
                     {"exit_code", t.exit_code},
                     {"signal", t.signal},
                     {"stopped", t.stopped},
                     {"lost", t.lost}});
  }
  return nlohmann::json{{"master_port", j.master_port}, {"tasks", tasks}}.dump();
}

StatusOr<std::pair<std::string, std::string>> ClusterState::LocateTask(
    sched::JobId id, uint32_t index, std::optional<uint32_t> attempt) const {
  auto it = jobs_.records().find(id);
  if (it == jobs_.records().end())
    return Status::NotFound("job " + std::to_string(id) + " does not exist");
  const JobRecord& j = it->second;
  if (!attempt || *attempt == j.attempt) {
    // No task process has run: the reason, not a node's "no logs for task" (the sentence says
    // what to fix: the image, the registry, the artifact).
    if (j.state == JobState::kStarting && !j.staging_waiting.empty()) {
      return Status::FailedPrecondition("job " + std::to_string(id) + " is still staging (" +
                                        j.reason_detail +
                                        "); its tasks have not started, so there are no logs yet");
    }
    for (const auto& t : j.tasks) {
      if (t.index != index) continue;
      if (t.message.rfind(kNeverStarted, 0) == 0) {
        return Status::FailedPrecondition("job " + std::to_string(id) +
                                          " never started its tasks, so there are no logs: " +
                                          t.message.substr(std::strlen(kNeverStarted)));
      }
      return std::make_pair(topology_->nodes()[t.node].name, TaskId(j.id, j.attempt, t.index));
    }
  }
  // An ended attempt: its logs stay on the nodes it ran on (the agents keep them).
  if (attempt || j.tasks.empty()) {
    for (auto u = queues_.attempts().rbegin(); u != queues_.attempts().rend(); ++u) {
      if (u->job != id || (attempt && u->attempt != *attempt) || u->task_nodes.empty()) continue;
      if (index >= u->task_nodes.size()) {
        return Status::NotFound("attempt " + std::to_string(u->attempt) + " of job " +
                                std::to_string(id) + " had no task " + std::to_string(index) +
                                " (it had " + std::to_string(u->task_nodes.size()) + ")");
      }
      return std::make_pair(u->task_nodes[index], TaskId(j.id, u->attempt, index));
    }
    if (attempt) {
      return Status::NotFound("job " + std::to_string(id) + " has no attempt " +
                              std::to_string(*attempt) + " that ran (its attempts so far: 0 to " +
                              std::to_string(j.attempt) + ")");
    }
  }
  if (j.tasks.empty())
    return Status::FailedPrecondition("job " + std::to_string(id) +
                                      " has not started; it has no logs yet");
  return Status::NotFound("job " + std::to_string(id) + " has no task " + std::to_string(index) +
                          " (it has " + std::to_string(j.tasks.size()) + ")");
}

bool ClusterState::IsTaskLive(const std::string& task_id) const {
  sched::JobId id;
  uint32_t attempt, index;
  if (!ParseTaskId(task_id, &id, &attempt, &index)) return false;
  if (alloc_.stopping().count(task_id)) return true;
  auto it = jobs_.records().find(id);
  if (it == jobs_.records().end() || it->second.attempt != attempt) return false;
  for (const auto& t : it->second.tasks) {
    if (t.index == index) return t.phase != TaskRun::Phase::kEnded;
  }
  return false;
}

ClusterState::Counts ClusterState::GetCounts() const {
  const int64_t start = MonotonicNanos();
  if (Counts* kept = counts_.Fresh(start)) {
    kept->placements_total = static_cast<int64_t>(placements_total_);
    kept->heartbeat_lag = nodes_.hearing().last_lag();
    kept->nodes_lost_total = nodes_.hearing().nodes_lost_total();
    return *kept;
  }
  Counts c;
  constexpr int kJobStates = static_cast<int>(JobState::kTimedOut) + 1;
  int64_t jobs[kJobStates] = {};
  for (const auto& [id, j] : jobs_.records()) jobs[static_cast<int>(j.state)]++;
  for (int s = 0; s < kJobStates; ++s)
    c.jobs_by_state[std::string(job::JobStateName(static_cast<JobState>(s)))] = jobs[s];
  for (uint32_t n = 0; n < nodes_.size(); ++n) c.nodes_by_state[NodeState(n)]++;
  c.gpus_total = topology_->total_gpus();
  c.gpus_allocated_milli = alloc_.usage().AllocatedMilliGpu();
  enum { kAllocated, kIdle, kFragmented, kDraining, kFailed, kUnavailable, kStranded, kGpuStates };
  int64_t gpus[kGpuStates] = {};
  for (uint32_t g = 0; g < topology_->gpus().size(); ++g) {
    const uint32_t n = topology_->gpus()[g].node;
    const int64_t cap = cluster::kMilliPerGpu;
    const int64_t used =
        cap - (topology_->gpus()[g].mig ? alloc_.usage().gpu_free_milli(g) * cluster::kMilliPerGpu /
                                              cluster::kMigSlicesPerGpu
                                        : alloc_.usage().gpu_free_milli(g));
    const health::HealthState hs = std::max(health_.gpu_state(g), health_.node_state(n));
    gpus[kAllocated] += used;
    if (hs == health::HealthState::kFailed) {
      gpus[kFailed] += cap - used;
    } else if (hs == health::HealthState::kDraining || hs == health::HealthState::kQuarantined) {
      gpus[kDraining] += cap - used;
    } else if (!alloc_.usage().node(n).condition.schedulable || !alloc_.usage().gpu_available(g)) {
      gpus[kUnavailable] += cap - used;
    } else {
      gpus[used > 0                                       ? kFragmented
           : cluster::StrandsGpus(alloc_.usage().node(n)) ? kStranded
                                                          : kIdle] += cap - used;
    }
  }
  const char* names[kGpuStates] = {"allocated", "idle",        "fragmented", "draining",
                                   "failed",    "unavailable", "stranded"};
  for (int s = 0; s < kGpuStates; ++s) c.gpus_by_state[names[s]] = gpus[s];
  c.placements_total = static_cast<int64_t>(placements_total_);
  c.heartbeat_lag = nodes_.hearing().last_lag();
  c.nodes_lost_total = nodes_.hearing().nodes_lost_total();
  counts_.Keep(c, start, MonotonicNanos());
  return c;
}

}  // namespace hangar::controller
