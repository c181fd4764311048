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

nlohmann::json AttemptUsage::ToJson() const {
  return {{"job", job},
          {"attempt", attempt},
          {"user", user},
          {"queue", queue},
          {"tier", tier},
          {"start", start},
          {"end", end},
          {"milli_gpu", milli_gpu},
          {"idle_gpu_ms", idle_gpu_ms},
          {"lost_gpu_ms", lost_gpu_ms},
          {"how", how},
          {"nodes", task_nodes},
          {"staging_gpu_ms", staging_gpu_ms}};
}

AttemptUsage AttemptUsage::FromJson(const nlohmann::json& j) {
  AttemptUsage u;
  u.job = j.value("job", uint64_t{0});
  u.attempt = j.value("attempt", 0u);
  u.user = j.value("user", "");
  u.queue = j.value("queue", "");
  u.tier = j.value("tier", "");
  u.start = j.value("start", Time{0});
  u.end = j.value("end", Time{0});
  u.milli_gpu = j.value("milli_gpu", int64_t{0});
  u.idle_gpu_ms = j.value("idle_gpu_ms", int64_t{0});
  u.lost_gpu_ms = j.value("lost_gpu_ms", int64_t{0});
  u.staging_gpu_ms = j.value("staging_gpu_ms", int64_t{0});
  u.how = j.value("how", "");
  u.task_nodes = j.value("nodes", std::vector<std::string>{});
  return u;
}

namespace {

// Every queue of a tree by name, flattened (children without their own children), for comparing
// two versions of the tree.
void Flatten(const std::vector<job::QueueSpec>& specs, const std::string& parent,
             std::map<std::string, std::string>* out) {
  for (const auto& s : specs) {
    job::QueueSpec own = s;
    own.children.clear();
    nlohmann::json j = job::QueuesToJson({own})["queues"][0];
    j["parent"] = parent;
    (*out)[s.name] = j.dump();
    Flatten(s.children, s.name, out);
  }
}

}  // namespace

void ClusterState::UseQueues(std::vector<job::QueueSpec> specs,
                             std::shared_ptr<const q::QueueTree> tree) {
  // Carry each queue's history over by name.
  std::vector<std::vector<double>> history(tree->nodes().size(),
                                           std::vector<double>(tree->dims(), 0.0));
  if (queue_tree_) {
    for (size_t i = 0; i < tree->nodes().size(); ++i) {
      const int old = queue_tree_->Find(tree->nodes()[i].name);
      if (old >= 0 && static_cast<size_t>(old) < share_history_.size() &&
          tree->dims() == queue_tree_->dims()) {
        history[i] = share_history_[old];
      }
    }
  }
  share_history_ = std::move(history);
  queue_specs_ = std::move(specs);
  queue_tree_ = std::move(tree);
  queues_trivial_ = queue_tree_->nodes().size() == 1;
  for (const auto& n : queue_tree_->nodes()) {
    for (size_t d = 0; d < queue_tree_->dims(); ++d) {
      queues_trivial_ = queues_trivial_ && n.nominal[d] == 0 &&
                        n.borrow_limit[d] >= q::kUnlimited && n.lend_limit[d] >= q::kUnlimited;
    }
  }
  // What the scheduler does not read (idle policies, who may submit, who administers), by tree
  // node.
  queue_access_.assign(queue_tree_->nodes().size(), {});
  std::function<void(const std::vector<job::QueueSpec>&)> index =
      [&](const std::vector<job::QueueSpec>& specs) {
        for (const auto& s : specs) {
          if (const int x = queue_tree_->Find(s.name); x >= 0)
            queue_access_[x] = {s.idle, s.users, s.admins};
          index(s.children);
        }
      };
  index(queue_specs_);
  for (auto& [id, j] : jobs_) {
    const int leaf = queue_tree_->FindLeaf(j.spec->spec.queue);
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
  for (const auto& [id, j] : jobs_) {
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
  std::map<std::string, std::string> before, after;
  Flatten(queue_specs_, "", &before);
  Flatten(specs, "", &after);
  nlohmann::json created = nlohmann::json::array(), changed = nlohmann::json::array(),
                 unchanged = nlohmann::json::array(), removed = nlohmann::json::array();
  for (const auto& [name, text] : after) {
    auto it = before.find(name);
    (it == before.end() ? created : it->second == text ? unchanged : changed).push_back(name);
  }
  for (const auto& [name, text] : before) {
    if (!after.count(name)) removed.push_back(name);
  }
  *summary = {
      {"created", created}, {"changed", changed}, {"unchanged", unchanged}, {"removed", removed}};
  if (created.empty() && changed.empty() && removed.empty()) return Status::Ok();  // idempotent
  fx->batch.values.push_back({"queue", "tree", job::QueuesToJson(specs).dump(), false});
  fx->Event(now, "queue", "queues",
            "applied: " + std::to_string(created.size()) + " created, " +
                std::to_string(changed.size()) + " changed, " + std::to_string(removed.size()) +
                " removed");
  UseQueues(std::move(specs), std::move(tree));
  return Status::Ok();
}

nlohmann::json ClusterState::QueuesJson() const { return job::QueuesToJson(queue_specs_); }

std::vector<std::vector<int64_t>> ClusterState::RunningCharges(std::vector<int>* leaf_of) const {
  std::vector<std::vector<int64_t>> out;
  for (sched::JobId id : active_) {
    const JobRecord& j = jobs_.at(id);
    if (j.tasks.empty() || j.queue >= queue_tree_->nodes().size()) continue;
    out.push_back(queue_tree_->Charge(*j.request, &j.assignment, *topology_));
    if (leaf_of) leaf_of->push_back(static_cast<int>(j.queue));
  }
  return out;
}

void ClusterState::UpdateShareHistory(Time now) {
  if (queues_trivial_ || share_history_at_ == 0 || now <= share_history_at_) {
    share_history_at_ = std::max(share_history_at_, now);
    return;
  }
  const Duration dt = now - share_history_at_;
  share_history_at_ = now;
  std::vector<std::vector<int64_t>> usage(queue_tree_->nodes().size(),
                                          std::vector<int64_t>(queue_tree_->dims(), 0));
  std::vector<int> leaf_of;
  auto charges = RunningCharges(&leaf_of);
  for (size_t k = 0; k < charges.size(); ++k) {
    for (int x = leaf_of[k]; x >= 0; x = queue_tree_->nodes()[x].parent) {
      for (size_t d = 0; d < charges[k].size(); ++d) usage[x][d] += charges[k][d];
    }
  }
  sched::owner::DecayShareHistory(share_history_, usage, dt, options_.share_half_life);
}

nlohmann::json ClusterState::ShareJson(Time now) const {
  (void)now;
  q::QuotaLedger ledger(queue_tree_.get());
  std::vector<int> leaf_of;
  auto charges = RunningCharges(&leaf_of);
  for (size_t k = 0; k < charges.size(); ++k) ledger.Add(leaf_of[k], charges[k]);
  // Each leaf's head job: the first pending job in the queue policy's order.
  std::vector<sched::PendingJob> pending;
  for (sched::JobId id : pending_) {
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
  const auto& nodes = queue_tree_->nodes();
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
        static_cast<size_t>(x) < share_history_.size() ? &share_history_[x] : nullptr;
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
    for (size_t d = q::kFirstModel; d < queue_tree_->dims(); ++d) {
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
          {"cluster_gpus", static_cast<double>(queue_tree_->capacity()[q::kGpu]) / 1000.0},
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
  usage_log_.push_back(std::move(u));
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
  for (const auto& u : usage_log_) {
    if (u.end >= since) add(u);
  }
  for (sched::JobId id : active_) {  // attempts still running count up to now
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
                        {"stranded_gpus", usage_.StrandedGpus()}};
}

void ClusterState::ReclaimIdle(Time now, Effects* fx) {
  const Duration dt = idle_checked_at_ ? std::max<Duration>(0, now - idle_checked_at_) : 0;
  idle_checked_at_ = now;
  std::vector<std::pair<sched::JobId, std::string>> requeue, stop;
  // A checkpoint-requeue frees GPUs for someone else; with nobody waiting for GPUs it would only
  // restart the job where it was (killing a notebook's kernel every `for`), so it waits for one.
  bool someone_waits = false;
  for (sched::JobId p : pending_) {
    const JobRecord& w = jobs_.at(p);
    if (w.stopping_tasks == 0 && w.request->total_milli_gpu > 0) {
      someone_waits = true;
      break;
    }
  }
  for (sched::JobId id : active_) {
    JobRecord& j = jobs_.at(id);
    if (j.tasks.empty() || (j.state != JobState::kRunning && j.state != JobState::kStarting))
      continue;
    // The busiest of its GPUs, as the last heartbeats said; unknown telemetry counts as busy.
    int64_t idle_milli = 0;
    uint32_t busiest = 0;
    bool any_gpu = false, known = true;
    for (const auto& t : j.tasks) {
      if (t.phase == TaskRun::Phase::kEnded) continue;
      const NodeRecord& n = nodes_[t.node];
      for (const auto& g : j.assignment.GrantsOf(j.assignment.tasks[t.index])) {
        const uint32_t index = topology_->gpus()[g.gpu].index;
        any_gpu = true;
        if (!n.connected || index >= n.gpus.size()) {
          known = false;
          continue;
        }
        const uint32_t util = n.gpus[index].util_pct;
        busiest = std::max(busiest, util);
        if (static_cast<int>(util) < options_.idle_util_pct) idle_milli += g.milli;
      }
    }
    if (!any_gpu) continue;
    if (known) j.idle_gpu_ms += idle_milli * dt / 1000;
    if (j.queue >= queue_tree_->nodes().size()) continue;
    const job::IdlePolicy& policy = queue_access_[j.queue].idle;
    if (policy.gpu_util_below < 0 || policy.action == job::IdlePolicy::Action::kNone) continue;
    if (!known || static_cast<int>(busiest) >= policy.gpu_util_below ||
        j.state != JobState::kRunning) {
      j.idle_since = 0;
      j.idle_notified = false;
      continue;
    }
    if (j.idle_since == 0) j.idle_since = now;
    if (now - j.idle_since < policy.for_duration) continue;
    const std::string why = "reclaimed: its GPUs stayed below " +
                            std::to_string(policy.gpu_util_below) + "% utilisation for " +
                            FormatDuration(now - j.idle_since) + " (queue " + j.spec->spec.queue +
                            ": its idle policy, " +
                            std::string(job::IdleActionName(policy.action)) + ")";
    switch (policy.action) {
      case job::IdlePolicy::Action::kNotify:
        if (!j.idle_notified) {
          j.idle_notified = true;
          fx->Event(now, "job", "job/" + std::to_string(id),
                    "idle: its GPUs stayed below " + std::to_string(policy.gpu_util_below) +
                        "% utilisation for " + FormatDuration(now - j.idle_since) + " (queue " +
                        j.spec->spec.queue + " notifies only)");
        }
        break;
      case job::IdlePolicy::Action::kCheckpointRequeue:
        if (someone_waits) {
          requeue.emplace_back(id, why);
        } else if (!j.idle_notified) {
          j.idle_notified = true;
          fx->Event(now, "job", "job/" + std::to_string(id),
                    "idle: its GPUs stayed below " + std::to_string(policy.gpu_util_below) +
                        "% utilisation for " + FormatDuration(now - j.idle_since) +
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
    pending_.erase(id);
    StopTasks(j, std::max(options_.stop_grace, j.spec->spec.checkpoint.grace), fx);
    JobLifecycle::Transition(j, JobState::kCancelled, "idle reclaim");
    j.ended = now;
    j.message = why;
    fx->Event(now, "job", "job/" + std::to_string(id), why);
    Persist(j, fx);
    dirty_ = true;
  }
}

// ---- RBAC ----

bool ClusterState::NamedOnPath(int queue, const std::string& user, bool admins) const {
  for (int x = queue; x >= 0; x = queue_tree_->nodes()[x].parent) {
    const auto& names = admins ? queue_access_[x].admins : queue_access_[x].users;
    if (std::find(names.begin(), names.end(), user) != names.end()) return true;
  }
  return false;
}

bool ClusterState::QueueAdminOf(const Principal& p, const std::string& queue) const {
  if (p.role == Role::kAdmin) return true;
  if (p.role != Role::kQueueAdmin) return false;
  const int q = queue_tree_->Find(queue);
  return q >= 0 && NamedOnPath(q, p.user, /*admins=*/true);
}

Status ClusterState::MaySubmit(const Principal& p, const std::string& queue) const {
  HANGAR_RETURN_IF_ERROR(Allow(p, Permission::kJobsSubmit));
  if (p.role == Role::kAdmin || QueueAdminOf(p, queue)) return Status::Ok();
  const int leaf = queue_tree_->FindLeaf(queue);
  if (leaf < 0) return Status::Ok();  // Submit says the queue does not exist
  bool any_users = false;
  for (int x = leaf; x >= 0; x = queue_tree_->nodes()[x].parent)
    any_users |= !queue_access_[x].users.empty();
  if (!any_users || NamedOnPath(leaf, p.user, /*admins=*/false)) return Status::Ok();
  std::string granted;
  for (const auto& name : queue_tree_->LeafNames()) {
    const int l = queue_tree_->FindLeaf(name);
    bool open = true;
    for (int x = l; x >= 0; x = queue_tree_->nodes()[x].parent)
      open &= queue_access_[x].users.empty();
    if (open || NamedOnPath(l, p.user, false)) granted += (granted.empty() ? "" : ", ") + name;
  }
  return Status::PermissionDenied("permission jobs:submit on queue '" + queue +
                                  "' is missing: " + p.Describe() + " may submit to " +
                                  (granted.empty() ? std::string("no queue") : granted) +
                                  "; ask an admin to add " + p.user + " to the queue's users");
}

bool ClusterState::MaySeeJob(const Principal& p, const JobRecord& j) const {
  if (p.role == Role::kAdmin || p.role == Role::kViewer) return true;
  if (p.role == Role::kNode) return false;
  return j.spec->spec.user == p.user || QueueAdminOf(p, j.spec->spec.queue);
}

Status ClusterState::MayAccessJob(const Principal& p, sched::JobId id, bool write) const {
  HANGAR_RETURN_IF_ERROR(Allow(p, write ? Permission::kJobsCancel : Permission::kJobsRead));
  auto it = jobs_.find(id);
  if (it == jobs_.end()) return Status::Ok();  // the handler says it does not exist
  const JobRecord& j = it->second;
  const bool own = j.spec->spec.user == p.user;
  if (p.role == Role::kAdmin || own || QueueAdminOf(p, j.spec->spec.queue) ||
      (!write && p.role == Role::kViewer)) {
    return Status::Ok();
  }
  return Status::PermissionDenied(
      "permission " + std::string(write ? "jobs:cancel" : "jobs:read") + " on job " +
      std::to_string(id) + " is missing: " + p.Describe() + " may " + (write ? "cancel" : "see") +
      " only their own jobs" +
      (p.role == Role::kQueueAdmin ? " and those of the queues they administer" : "") +
      "; it belongs to " + j.spec->spec.user + " in queue " + j.spec->spec.queue);
}

std::vector<api::JobView> ClusterState::ListJobsFor(const Principal& p,
                                                    const std::string& state_filter,
                                                    size_t limit) const {
  std::vector<api::JobView> out;
  for (auto it = jobs_.rbegin(); it != jobs_.rend() && out.size() < limit; ++it) {
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
    return u.user == p.user || QueueAdminOf(p, u.queue);
  });
}

}  // namespace hangar::controller
