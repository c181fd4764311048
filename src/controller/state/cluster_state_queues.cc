// ClusterState: queues and quotas (the tree applied with `hangar apply -f queues.yaml`), fair
// share with decayed usage history, idle-GPU reclamation, and accounting of every attempt.
#include <algorithm>
#include <cmath>
#include <functional>

#include "controller/state/cluster_state.h"
#include "controller/state/job_lifecycle.h"
#include "sched/owner/share_history.h"

namespace hangar::controller {

using job::JobState;
namespace q = sched::queue;

void ClusterState::UseQueues(std::vector<job::QueueSpec> specs,
                             std::shared_ptr<const q::QueueTree> tree) {
  queues_.Use(std::move(specs), std::move(tree));
  for (auto& [id, j] : jobs_.records()) {
    const int leaf = queues_.tree().FindLeaf(j.spec->spec.queue);
    j.queue = leaf >= 0 ? static_cast<uint32_t>(leaf) : UINT32_MAX;
  }
  dirty_ = true;
}

Status ClusterState::ApplyQueues(std::vector<job::QueueSpec> specs, Time now, Effects* fx,
                                 nlohmann::json* summary) {
  if (specs.empty())
    return Status::InvalidArgument(
        "the queues file declares no queue; declare at least one under 'queues:'");
  HANGAR_ASSIGN_OR_RETURN(auto tree, q::QueueTree::Build(specs, *topology_));
  // A queue that still has unfinished jobs must stay a leaf queue.
  std::map<std::string, int> unfinished;
  for (const auto& [id, j] : jobs_.records()) {
    if (!job::IsFinal(j.state)) unfinished[j.spec->spec.queue]++;
  }
  for (const auto& [name, n] : unfinished) {
    if (tree->FindLeaf(name) < 0) {
      return Status::FailedPrecondition(
          "queue '" + name + "' has " + std::to_string(n) +
          " unfinished jobs and the new tree has no leaf queue of that name; keep it, "
          "or cancel its jobs (`hangar jobs`) and apply again");
    }
  }
  *summary = queues_.Diff(specs);
  const size_t created = (*summary)["created"].size(), changed = (*summary)["changed"].size(),
               removed = (*summary)["removed"].size();
  if (created + changed + removed == 0) return Status::Ok();  // idempotent
  fx->batch.values.push_back({"queue", "tree", job::QueuesToJson(specs).dump(), false});
  fx->Event(now, "queue", "queues",
            "applied: " + std::to_string(created) + " created, " + std::to_string(changed) +
                " changed, " + std::to_string(removed) + " removed");
  UseQueues(std::move(specs), std::move(tree));
  return Status::Ok();
}

nlohmann::json ClusterState::QueuesJson() const { return job::QueuesToJson(queues_.specs()); }

std::vector<std::vector<int64_t>> ClusterState::RunningCharges(std::vector<int>* leaf_of) const {
  std::vector<std::vector<int64_t>> out;
  for (sched::JobId id : jobs_.active()) {
    const JobRecord& j = jobs_.at(id);
    if (j.tasks.empty() || j.queue >= queues_.tree().nodes().size()) continue;
    out.push_back(queues_.tree().Charge(*j.request, &j.assignment, *topology_));
    if (leaf_of) leaf_of->push_back(static_cast<int>(j.queue));
  }
  return out;
}

void ClusterState::UpdateShareHistory(Time now) {
  const Duration dt = queues_.HistoryStep(now);
  if (dt <= 0) return;
  const q::QueueTree& tree = queues_.tree();
  std::vector<std::vector<int64_t>> usage(tree.nodes().size(),
                                          std::vector<int64_t>(tree.dims(), 0));
  std::vector<int> leaf_of;
  auto charges = RunningCharges(&leaf_of);
  for (size_t k = 0; k < charges.size(); ++k) {
    for (int x = leaf_of[k]; x >= 0; x = tree.nodes()[x].parent) {
      for (size_t d = 0; d < charges[k].size(); ++d) usage[x][d] += charges[k][d];
    }
  }
  queues_.DecayHistory(usage, dt, options_.share_half_life);
}

nlohmann::json ClusterState::ShareJson(Time now) const {
  (void)now;
  q::QuotaLedger ledger(&queues_.tree());
  std::vector<int> leaf_of;
  auto charges = RunningCharges(&leaf_of);
  for (size_t k = 0; k < charges.size(); ++k) ledger.Add(leaf_of[k], charges[k]);
  // Each leaf's head job: the first pending job in the queue policy's order.
  std::vector<sched::PendingJob> pending;
  for (sched::JobId id : jobs_.waiting()) {
    const JobRecord& j = jobs_.at(id);
    sched::PendingJob p;
    p.id = id;
    p.request = j.request.get();
    p.priority = j.spec->spec.priority;
    p.tier = j.spec->spec.tier;
    p.submit = j.submitted;
    p.seq = id;
    p.queue = j.queue;
    pending.push_back(p);
  }
  std::vector<uint32_t> order;
  q::OrderJobs(scheduler_->queue_policy(), pending, &order);
  const auto& nodes = queues_.tree().nodes();
  std::vector<int64_t> waiting(nodes.size(), 0);
  std::vector<sched::JobId> head(nodes.size(), 0);
  for (uint32_t i : order) {
    const uint32_t leaf = pending[i].queue;
    if (leaf >= nodes.size()) continue;
    for (int x = static_cast<int>(leaf); x >= 0; x = nodes[x].parent) {
      if (waiting[x]++ == 0) head[x] = pending[i].id;
    }
  }
  nlohmann::json out = nlohmann::json::array();
  std::function<void(int, int)> walk = [&](int x, int depth) {
    const q::QueueNode& n = nodes[x];
    const std::vector<double>* h =
        static_cast<size_t>(x) < queues_.history().size() ? &queues_.history()[x] : nullptr;
    nlohmann::json row = {
        {"name", n.name},
        {"depth", depth},
        {"leaf", n.leaf()},
        {"weight", n.weight},
        {"guarantee_gpus", static_cast<double>(n.nominal[q::kGpu]) / 1000.0},
        {"in_use_gpus", static_cast<double>(ledger.usage(x, q::kGpu)) / 1000.0},
        {"borrowed_gpus", static_cast<double>(ledger.Borrowed(x, q::kGpu)) / 1000.0},
        {"lent_gpus", static_cast<double>(ledger.Lent(x, q::kGpu)) / 1000.0},
        {"share", ledger.Share(x)},
        {"recent_share", ledger.Share(x, h)},
        {"pending", waiting[x]},
    };
    nlohmann::json models = nlohmann::json::object();
    for (size_t d = q::kFirstModel; d < queues_.tree().dims(); ++d) {
      if (n.nominal[d] > 0)
        models[topology_->models()[d - q::kFirstModel]] =
            static_cast<double>(n.nominal[d]) / 1000.0;
    }
    if (!models.empty()) row["guarantee_by_model"] = models;
    if (n.borrow_limit[q::kGpu] < q::kUnlimited)
      row["borrowing_limit_gpus"] = static_cast<double>(n.borrow_limit[q::kGpu]) / 1000.0;
    if (head[x]) {
      const JobRecord& j = jobs_.at(head[x]);
      row["head_job"] = head[x];
      row["head_waits"] = !j.reason_detail.empty() ? j.reason_detail
                          : j.reason.rule == sched::Rule::kNone
                              ? "waiting for the next scheduling cycle"
                              : j.reason.ToString(*topology_);
    }
    out.push_back(std::move(row));
    for (int c : n.children) walk(c, depth + 1);
  };
  for (size_t x = 0; x < nodes.size(); ++x) {
    if (nodes[x].parent < 0) walk(static_cast<int>(x), 0);
  }
  return {{"queues", out},
          {"cluster_gpus", static_cast<double>(queues_.tree().capacity()[q::kGpu]) / 1000.0},
          {"half_life_s", options_.share_half_life / kSecond}};
}

AttemptUsage ClusterState::AttemptSoFar(const JobRecord& j, Time now) const {
  AttemptUsage u;
  u.job = j.id;
  u.attempt = j.attempt;
  u.user = j.spec->spec.user;
  u.queue = j.spec->spec.queue;
  u.tier = std::string(job::TierName(j.spec->spec.tier));
  u.start = j.started ? j.started : now;
  u.end = now;
  u.milli_gpu = j.assignment.TotalMilliGpu(*topology_);
  u.idle_gpu_ms = j.idle_gpu_ms;
  u.staging_gpu_ms = j.staging_gpu_ms;
  u.task_nodes.resize(j.tasks.size());
  for (const auto& t : j.tasks) {
    if (t.index < u.task_nodes.size()) u.task_nodes[t.index] = topology_->nodes()[t.node].name;
  }
  return u;
}

void ClusterState::CloseAttempt(const JobRecord& j, Time now, int64_t lost_gpu_ms,
                                const std::string& how, Effects* fx) {
  goodput_.Ended(j.id, j.attempt, how, now);  // a job ended while it waited is told too
  if (j.tasks.empty()) return;
  AttemptUsage u = AttemptSoFar(j, now);
  u.lost_gpu_ms = lost_gpu_ms;
  u.how = how;
  fx->batch.values.push_back(
      {"usage", std::to_string(j.id) + "." + std::to_string(j.attempt), u.ToJson().dump(), false});
  queues_.Account(std::move(u));
}

StatusOr<nlohmann::json> ClusterState::UsageJson(
    const std::string& by, Time since, Time now,
    const std::function<bool(const AttemptUsage&)>& visible) const {
  if (by != "queue" && by != "user") return Status::InvalidArgument("by must be queue or user");
  struct Row {
    double gpu_ms = 0, guaranteed_ms = 0, opportunistic_ms = 0, idle_ms = 0, lost_ms = 0,
           staging_ms = 0;
    std::set<sched::JobId> jobs;
  };
  std::map<std::string, Row> rows;
  auto add = [&](const AttemptUsage& u) {
    if (visible && !visible(u)) return;
    const Time from = std::max(u.start, since), to = u.end;
    if (to <= from && !(u.end >= since && (u.lost_gpu_ms > 0 || u.staging_gpu_ms > 0))) return;
    Row& r = rows[by == "queue" ? u.queue : u.user];
    const double ms = static_cast<double>(u.milli_gpu) *
                      static_cast<double>(std::max<Time>(0, to - from)) / 1000.0;
    // Idle time is prorated to the part of the attempt inside the window.
    const double part = u.end > u.start ? static_cast<double>(std::max<Time>(0, to - from)) /
                                              static_cast<double>(u.end - u.start)
                                        : 0;
    r.gpu_ms += ms;
    (u.tier == "opportunistic" ? r.opportunistic_ms : r.guaranteed_ms) += ms;
    r.idle_ms += static_cast<double>(u.idle_gpu_ms) * part;
    r.lost_ms += static_cast<double>(u.lost_gpu_ms);
    r.staging_ms += static_cast<double>(u.staging_gpu_ms);
    r.jobs.insert(u.job);
  };
  for (const auto& u : queues_.attempts()) {
    if (u.end >= since) add(u);
  }
  for (sched::JobId id : jobs_.active()) {  // attempts still running count up to now
    const JobRecord& j = jobs_.at(id);
    if (!j.tasks.empty()) add(AttemptSoFar(j, now));
  }
  constexpr double kHourMs = 3600.0 * 1000.0;
  nlohmann::json out = nlohmann::json::array();
  for (const auto& [key, r] : rows) {
    out.push_back({{by, key},
                   {"gpu_hours", r.gpu_ms / kHourMs},
                   {"guaranteed_gpu_hours", r.guaranteed_ms / kHourMs},
                   {"opportunistic_gpu_hours", r.opportunistic_ms / kHourMs},
                   {"idle_gpu_hours", r.idle_ms / kHourMs},
                   {"lost_to_preemption_gpu_hours", r.lost_ms / kHourMs},
                   {"staging_gpu_hours", r.staging_ms / kHourMs},
                   {"jobs", r.jobs.size()}});
  }
  return nlohmann::json{{"by", by},
                        {"since_ms", since},
                        {"until_ms", now},
                        {"rows", out},
                        {"stranded_gpus", alloc_.usage().StrandedGpus()}};
}

namespace {

// A checkpoint-requeue frees GPUs for someone else; with nobody waiting for GPUs it would only
// restart the job where it was (killing a notebook's kernel every `for`), so it waits for one.
bool SomeoneWaitsForGpus(const JobTable& jobs) {
  for (sched::JobId p : jobs.waiting()) {
    const JobRecord& w = jobs.at(p);
    if (w.stopping_tasks == 0 && w.request->total_milli_gpu > 0) return true;
  }
  return false;
}

// How idle a running job's GPUs were at the last heartbeats: the GPU share below `idle_util_pct`,
// the busiest GPU's utilisation, whether it has GPUs, and whether every one of them reported
// (unknown telemetry counts as busy).
struct GpuIdleness {
  int64_t idle_milli = 0;
  uint32_t busiest = 0;
  bool any_gpu = false, known = true;
};

GpuIdleness IdlenessOf(const JobRecord& j, const NodeTable& nodes, const cluster::Topology& topo,
                       int idle_util_pct) {
  GpuIdleness out;
  for (const auto& t : j.tasks) {
    if (t.phase == TaskRun::Phase::kEnded) continue;
    const NodeRecord& n = nodes[t.node];
    for (const auto& g : j.assignment.GrantsOf(j.assignment.tasks[t.index])) {
      const uint32_t index = topo.gpus()[g.gpu].index;
      out.any_gpu = true;
      if (!n.connected || index >= n.gpus.size()) {
        out.known = false;
        continue;
      }
      const uint32_t util = n.gpus[index].util_pct;
      out.busiest = std::max(out.busiest, util);
      if (static_cast<int>(util) < idle_util_pct) out.idle_milli += g.milli;
    }
  }
  return out;
}

// Why the idle policy reclaims `j`, idle for `idle`.
std::string ReclaimedWhy(const JobRecord& j, const job::IdlePolicy& policy, bool terminal,
                         Duration idle) {
  return "reclaimed: its GPUs stayed below " + std::to_string(policy.gpu_util_below) +
         "% utilisation" + (terminal ? " and its terminal had no input" : "") + " for " +
         FormatDuration(idle) + " (queue " + j.spec->spec.queue + ": its idle policy, " +
         std::string(job::IdleActionName(policy.action)) + ")";
}

// The first words of an idle job's event.
std::string IdleNote(const JobRecord& j, const job::IdlePolicy& policy, Time now) {
  return "idle: its GPUs stayed below " + std::to_string(policy.gpu_util_below) +
         "% utilisation for " + FormatDuration(now - j.idle_since);
}

}  // namespace

void ClusterState::ReclaimIdle(Time now, Effects* fx) {
  const Duration dt = queues_.IdleCheckStep(now);
  std::vector<std::pair<sched::JobId, std::string>> requeue, stop;
  const bool someone_waits = SomeoneWaitsForGpus(jobs_);
  for (sched::JobId id : jobs_.active()) {
    JobRecord& j = jobs_.at(id);
    if (j.tasks.empty() || (j.state != JobState::kRunning && j.state != JobState::kStarting))
      continue;
    const GpuIdleness busy = IdlenessOf(j, nodes_, *topology_, options_.idle_util_pct);
    if (!busy.any_gpu) continue;
    if (busy.known) j.idle_gpu_ms += busy.idle_milli * dt / 1000;
    if (j.queue >= queues_.tree().nodes().size()) continue;
    const job::IdlePolicy& policy = queues_.access(j.queue).idle;
    if (policy.gpu_util_below < 0 || policy.action == job::IdlePolicy::Action::kNone) continue;
    if (!busy.known || static_cast<int>(busy.busiest) >= policy.gpu_util_below ||
        j.state != JobState::kRunning) {
      j.idle_since = 0;
      j.idle_notified = false;
      j.idle_warned = false;
      continue;
    }
    if (j.idle_since == 0) j.idle_since = now;
    // A session with a terminal is idle only while no one types into it either (an attached
    // but forgotten shell is the case to reclaim, not a person reading a long output); whoever
    // is attached is warned first, in the terminal.
    Time idle_from = j.idle_since;
    const bool terminal = j.spec->spec.terminal;
    if (terminal) {
      idle_from = std::max(idle_from, j.input_at > 0 ? j.input_at : j.started);
      const Duration lead = std::min<Duration>(policy.for_duration / 2, 5 * kMinute);
      const Duration idle = now - idle_from;
      if (idle < policy.for_duration - lead) {
        j.idle_warned = false;
      } else if (idle < policy.for_duration && !j.idle_warned &&
                 policy.action != job::IdlePolicy::Action::kNotify) {
        WarnIdleSession(j, policy, idle, policy.for_duration - idle, now, fx);
        j.idle_warned = true;
      }
    }
    if (now - idle_from < policy.for_duration) continue;
    const std::string why = ReclaimedWhy(j, policy, terminal, now - idle_from);
    switch (policy.action) {
      case job::IdlePolicy::Action::kNotify:
        if (!j.idle_notified) {
          j.idle_notified = true;
          fx->Event(now, "job", "job/" + std::to_string(id),
                    IdleNote(j, policy, now) + " (queue " + j.spec->spec.queue + " notifies only)");
        }
        break;
      case job::IdlePolicy::Action::kCheckpointRequeue:
        if (someone_waits) {
          requeue.emplace_back(id, why);
        } else if (!j.idle_notified) {
          j.idle_notified = true;
          fx->Event(now, "job", "job/" + std::to_string(id),
                    IdleNote(j, policy, now) +
                        "; kept running, since no job waits for GPUs (queue " + j.spec->spec.queue +
                        " checkpoints and requeues it once one does)");
        }
        break;
      case job::IdlePolicy::Action::kStop:
        stop.emplace_back(id, why);
        break;
      case job::IdlePolicy::Action::kNone:
        break;
    }
  }
  for (const auto& [id, why] : requeue) Requeue(jobs_.at(id), why, now, fx);
  for (const auto& [id, why] : stop) {
    JobRecord& j = jobs_.at(id);
    CloseAttempt(j, now, 0, "reclaimed", fx);
    StopTasks(j, std::max(options_.stop_grace, j.spec->spec.checkpoint.grace), fx);
    jobs_.Move(j, JobState::kCancelled, "idle reclaim");
    j.ended = now;
    j.message = why;
    fx->Event(now, "job", "job/" + std::to_string(id), why);
    Persist(j, fx);
    dirty_ = true;
  }
}

void ClusterState::ObserveTerminals(const pb::Heartbeat& hb, Time now) {
  for (const pb::TerminalActivity& t : hb.terminals()) {
    sched::JobId id;
    uint32_t attempt, index;
    if (!ParseTaskId(t.task_id(), &id, &attempt, &index)) continue;
    auto it = jobs_.records().find(id);
    if (it == jobs_.records().end() || it->second.attempt != attempt ||
        !it->second.spec->spec.terminal)
      continue;
    JobRecord& j = it->second;
    j.input_at = std::max(j.input_at, now - std::max<int64_t>(0, t.input_idle_ms()));
    j.attached = t.attached();
  }
}

const job::IdlePolicy* ClusterState::IdlePolicyOf(const JobRecord& j) const {
  if (j.queue >= queues_.tree().nodes().size()) return nullptr;
  const job::IdlePolicy& policy = queues_.access(j.queue).idle;
  if (policy.gpu_util_below < 0 || policy.action == job::IdlePolicy::Action::kNone) return nullptr;
  return &policy;
}

void ClusterState::WarnIdleSession(const JobRecord& j, const job::IdlePolicy& policy, Duration idle,
                                   Duration left, Time now, Effects* fx) {
  if (j.tasks.empty()) return;
  const std::string what = policy.action == job::IdlePolicy::Action::kStop
                               ? "end it"
                               : "checkpoint it and put it back in the queue";
  pb::ControllerMessage m;
  pb::TerminalNotice* notice = m.mutable_terminal_notice();
  notice->set_task_id(TaskId(j.id, j.attempt, j.tasks[0].index));
  notice->set_text("\r\n[hangar] this session has been idle for " + FormatDuration(idle) +
                   " (its GPUs below " + std::to_string(policy.gpu_util_below) +
                   "% utilisation, nothing typed); queue " + j.spec->spec.queue + " will " + what +
                   " in " + FormatDuration(left) + " unless you type something.\r\n");
  fx->messages.push_back({topology_->nodes()[j.tasks[0].node].name, std::move(m)});
  fx->Event(now, "job", "job/" + std::to_string(j.id),
            "idle: warned " + std::to_string(j.attached) + " attached session(s) that queue " +
                j.spec->spec.queue + " will " + what + " in " + FormatDuration(left));
}

// ---- RBAC ----

Status ClusterState::MaySubmit(const Principal& p, const std::string& queue) const {
  HANGAR_RETURN_IF_ERROR(Allow(p, Permission::kJobsSubmit));
  return queues_.OpenTo(p, queue);
}

bool ClusterState::MaySeeJob(const Principal& p, const JobRecord& j) const {
  if (auto by_role = MaySeeByRole(p, j.spec->spec.user)) return *by_role;
  return queues_.AdministeredBy(p, j.spec->spec.queue);
}

Status ClusterState::MayAccessJob(const Principal& p, sched::JobId id, Permission perm) const {
  HANGAR_RETURN_IF_ERROR(Allow(p, perm));
  const bool write = perm != Permission::kJobsRead;
  auto it = jobs_.records().find(id);
  if (it == jobs_.records().end()) return Status::Ok();  // the handler says it does not exist
  const JobRecord& j = it->second;
  const bool own = j.spec->spec.user == p.user;
  if (p.role == Role::kAdmin || own || queues_.AdministeredBy(p, j.spec->spec.queue) ||
      (!write && p.role == Role::kViewer)) {
    return Status::Ok();
  }
  return JobAccessRefused(p, perm, id, j.spec->spec.user, j.spec->spec.queue);
}

std::vector<api::JobView> ClusterState::ListJobsFor(const Principal& p,
                                                    const std::string& state_filter,
                                                    size_t limit) const {
  std::vector<api::JobView> out;
  for (auto it = jobs_.records().rbegin(); it != jobs_.records().rend() && out.size() < limit;
       ++it) {
    if (!state_filter.empty() && job::JobStateName(it->second.state) != state_filter) continue;
    if (!MaySeeJob(p, it->second)) continue;
    api::JobView v = View(it->second);
    v.spec = nullptr;
    out.push_back(std::move(v));
  }
  return out;
}

StatusOr<nlohmann::json> ClusterState::UsageJsonFor(const Principal& p, const std::string& by,
                                                    Time since, Time now) const {
  HANGAR_RETURN_IF_ERROR(Allow(p, Permission::kUsageRead));
  if (p.role == Role::kAdmin || p.role == Role::kViewer) return UsageJson(by, since, now);
  return UsageJson(by, since, now, [&](const AttemptUsage& u) {
    return u.user == p.user || queues_.AdministeredBy(p, u.queue);
  });
}

}  // namespace hangar::controller
