// ClusterState: nodes -- agents registering and reconciling, heartbeats, task status, lost
// nodes, and the operator's drain.
#include "common/version.h"
#include "controller/state/cluster_state.h"
#include "controller/state/job_lifecycle.h"

namespace hangar::controller {

using job::JobState;

namespace {

// Whether an agent's registration may be taken: its node is in cluster.yaml, its version within
// the skew this controller works with, and its GPU count the one declared. The node's index.
StatusOr<uint32_t> AdmitAgent(const cluster::Topology& topology, const pb::Inventory& inv) {
  auto found = topology.FindNode(inv.node());
  if (!found) {
    return Status::NotFound("node '" + inv.node() +
                            "' is not in this cluster; add it to cluster.yaml or start the agent "
                            "with --node set to one of its nodes");
  }
  if (Status skew = CheckAgentSkew(Version(), inv.agent_version()); !skew.ok()) {
    return Status::FailedPrecondition("node '" + inv.node() + "' refused: " + skew.message());
  }
  const auto& declared = topology.nodes()[*found];
  if (static_cast<int>(inv.gpus_size()) != declared.num_gpus) {
    return Status::FailedPrecondition(
        "node '" + inv.node() + "' reports " + std::to_string(inv.gpus_size()) +
        " GPUs but cluster.yaml declares " + std::to_string(declared.num_gpus) +
        "; fix cluster.yaml or the agent's GPUs");
  }
  return *found;
}

// What a registration tells about the node: connected now, its software and the features its
// agent has, its GPUs' identities (their telemetry starts afresh).
void TakeInventory(const pb::Inventory& inv, Time now, NodeRecord* r) {
  r->connected = true;
  r->registered = true;
  r->lost = false;
  r->last_heartbeat = now;
  r->address = inv.address();
  r->validation_asked = false;
  r->software = {inv.driver_version(), inv.cuda_version(),  inv.kernel_version(),
                 inv.ofed_version(),   inv.agent_version(), inv.gpu_backend()};
  r->agent_features = AgentFeaturesOf(
      inv.agent_version(), std::vector<std::string>(inv.features().begin(), inv.features().end()));
  r->gpus.assign(static_cast<size_t>(inv.gpus_size()), GpuTelemetry{});
  for (int i = 0; i < inv.gpus_size(); ++i) {
    r->gpus[static_cast<size_t>(i)].uuid = inv.gpus(i).uuid();
    r->gpus[static_cast<size_t>(i)].pci_bus_id = inv.gpus(i).pci_bus_id();
  }
}

// The conditions a node view lists from what the controller knows of the node itself, beyond its
// health: an agent too old for some features, caches too small, tasks the store does not know.
// Sets `reason` from the held tasks when it has none.
void AddRecordConditions(const NodeRecord& r, const std::string& node, api::NodeView* v) {
  for (AgentFeature f : {AgentFeature::kTerminals, AgentFeature::kSessions,
                         AgentFeature::kMaintenance, AgentFeature::kContainerSteps}) {
    if (!(r.agent_features & Bit(f))) {
      v->conditions.push_back("AgentOutdated: " + AgentLacks(node, r.software.agent, f));
    }
  }
  if (r.image_cache_full) {
    v->conditions.push_back(
        "ImageCacheFull: the images its jobs need (" + std::to_string(r.image_bytes >> 20) +
        " MiB) do not fit its room (" + std::to_string(r.image_budget >> 20) +
        " MiB: the --image-cache-budget, or the disk's free space above --image-cache-min-free, "
        "whichever is less); raise the budget or free disk");
  }
  if (r.artifact_cache_full) {
    v->conditions.push_back("ArtifactCacheFull: the artifacts its jobs need (" +
                            std::to_string(r.artifact_bytes >> 20) +
                            " MiB) do not fit its cache budget (" +
                            std::to_string(r.artifact_budget >> 20) +
                            " MiB); raise --cache-budget or give --cache-dir a bigger disk");
  }
  if (!r.held.empty()) {
    std::string ids;
    for (const std::string& id : r.held) ids += (ids.empty() ? "" : ", ") + id;
    v->conditions.push_back(
        "OrphansHeld: it runs " + std::to_string(r.held.size()) +
        " task(s) the store does not know (" + ids + "), held running; `hangar orphans " + node +
        " --stop` stops them, `--release` lets them run on and the node take work");
    if (v->reason.empty()) v->reason = "runs tasks the store does not know: " + ids;
  }
}

// The health report's conditions as a node view lists them: the node's, then each GPU's that is
// not healthy.
void AddHealthConditions(const health::NodeReport& report, api::NodeView* v) {
  for (const auto& c : report.conditions) v->conditions.push_back(c.ToString());
  for (const auto& g : report.gpus) {
    if (g.state != health::HealthState::kHealthy) {
      v->conditions.push_back("GPU " + std::to_string(g.index) + " " +
                              std::string(health::StateName(g.state)) +
                              (g.conditions.empty() ? "" : ": " + g.conditions.front().reason));
    }
  }
}

}  // namespace

void ClusterState::UpdateCondition(uint32_t n) {
  const NodeRecord& r = nodes_[n];
  // Health says what the hardware allows (suspect ranks last, degraded takes no gangs); the
  // controller adds what it knows about the node's agent and the operator.
  cluster::NodeCondition c = health_.node_condition(n);
  // A hot spare is schedulable: only opportunistic work lands there (the scheduler's spares
  // window), and a replacement that takes it evicts that work.
  c.schedulable = c.schedulable && r.registered && r.connected && !r.lost && !r.drained &&
                  r.orphans.empty() && r.held.empty();
  c.agent_lacks = kEveryAgentFeature & ~r.agent_features;
  if (!(c == alloc_.usage().node(n).condition)) {
    alloc_.usage().SetNodeCondition(n, c);
    dirty_ = true;
  }
}

std::string ClusterState::NodeState(uint32_t n) const {
  const NodeRecord& r = nodes_[n];
  if (r.lost) return "lost";
  const health::HealthState h = health_.node_state(n);
  // A node an operator drained for maintenance ends "drained" (back with `hangar undrain`), not
  // "quarantined", which means a fault that waits for a remedy.
  const bool operator_drain_only =
      r.drained && h == health::HealthState::kQuarantined && !health_.held_for_fault(n);
  if ((h == health::HealthState::kDraining || h == health::HealthState::kQuarantined ||
       h == health::HealthState::kFailed) &&
      !operator_drain_only) {
    return std::string(health::StateName(h));
  }
  if (r.drained) {
    for (sched::JobId id : jobs_.active()) {
      for (const auto& t : jobs_.at(id).tasks) {
        if (t.node == n && t.phase != TaskRun::Phase::kEnded) return "draining";
      }
    }
    return "drained";
  }
  if (!r.registered) return "unknown";
  if (!r.connected) return "disconnected";
  if (!r.held.empty()) return "orphans-held";
  if (!r.orphans.empty()) return "recovering";
  if (h != health::HealthState::kHealthy) return std::string(health::StateName(h));
  return "ready";
}

void ClusterState::PersistNode(uint32_t n, Effects* fx) const {
  const NodeRecord& r = nodes_[n];
  const health::NodeReport report = health_.Report(n);
  auto reason = [](const std::vector<health::Condition>& c) {
    return c.empty() ? std::string() : c.front().reason;
  };
  nlohmann::json gpus = nlohmann::json::array();
  for (const auto& g : report.gpus) {
    gpus.push_back({{"state", std::string(health::StateName(g.state))},
                    {"since", g.since},
                    {"reason", reason(g.conditions)}});
  }
  nlohmann::json s = {{"drained", r.drained},
                      {"drain_reason", r.drain_reason},
                      {"boot_id", r.boot_id},
                      {"health",
                       {{"state", std::string(health::StateName(report.state))},
                        {"since", report.since},
                        {"reason", reason(report.conditions)},
                        {"gpus", gpus}}}};
  fx->batch.nodes.push_back({topology_->nodes()[n].name, s.dump()});
}

Status ClusterState::OnRegister(const pb::Register& reg, Time now, Effects* fx) {
  const pb::Inventory& inv = reg.inventory();
  auto found = AdmitAgent(*topology_, inv);
  if (!found.ok()) return found.status();
  const uint32_t n = *found;
  NodeRecord& r = nodes_[n];
  const bool was_lost = r.lost;
  TakeInventory(inv, now, &r);
  ApplyMigInventory(n, inv, now, fx);
  (void)health_.ObserveConfig(
      n, {inv.driver_version(), inv.cuda_version(), inv.kernel_version(), inv.ofed_version()}, now);
  if (was_lost) (void)health_.Apply({health::OperatorAction::Kind::kNodeReturned, n, -1, now});
  ObserveBoot(n, inv, now, fx);
  health_pass_.Touch();
  pb::ControllerMessage reply;
  pb::Registered* ok = reply.mutable_registered();
  ok->set_heartbeat_interval_ms(options_.heartbeat_interval);
  ok->set_data_token(options_.data_token);
  if (options_.node_lease > 0 && reg.lease_clock_ms() > 0) {  // an agent that keeps a fence
    // From when the agent asked (it counts from then), and no earlier than `now` here.
    r.lease_until = std::max(r.lease_until, now + options_.node_lease);
    ok->set_lease_ms(options_.node_lease);
    ok->set_lease_clock_ms(reg.lease_clock_ms());
  }
  SettleFencedZombies(n, reg);
  const std::set<std::string> reported = ReconcileReportedTasks(n, reg, now, ok, fx);
  RelaunchUnreported(n, reported, fx);
  fx->messages.insert(fx->messages.begin(), {inv.node(), std::move(reply)});
  fx->Event(now, "node", "node/" + inv.node(),
            std::string(was_lost ? "came back" : "registered") + " (" +
                std::to_string(inv.gpus_size()) + " GPUs, " + inv.gpu_backend() + " backend, " +
                std::to_string(reg.running_size()) + " running tasks)");
  discovered_fabric_.Observe(n, reg.discovered_topology());  // events from Tick
  UpdateCondition(n);
  return Status::Ok();
}

// A new boot id: the node rebooted since its agent last registered. That is a remediation of
// the node (latched faults close; it goes through validation before work).
// Only for a node with something to remedy: every remediation counts toward "5 in 7 days:
// failed", and routine reboots of healthy nodes must not.
void ClusterState::ObserveBoot(uint32_t n, const pb::Inventory& inv, Time now, Effects* fx) {
  NodeRecord& r = nodes_[n];
  const auto& declared = topology_->nodes()[n];
  const bool rebooted = !r.boot_id.empty() && !inv.boot_id().empty() && inv.boot_id() != r.boot_id;
  bool ailing = health_.node_state(n) != health::HealthState::kHealthy &&
                health_.node_state(n) != health::HealthState::kPendingValidation;
  for (uint32_t g = declared.first_gpu; g < declared.first_gpu + declared.num_gpus; ++g) {
    ailing = ailing || (health_.gpu_state(g) != health::HealthState::kHealthy &&
                        health_.gpu_state(g) != health::HealthState::kPendingValidation);
  }
  if (rebooted && !ailing) {
    fx->Event(now, "node", "node/" + inv.node(), "rebooted (new boot id)");
  } else if (rebooted) {
    (void)health_.Apply({health::OperatorAction::Kind::kRemediated, n, -1, now,
                         health::Remedy::kNodeReboot, "the node rebooted (new boot id)"});
    fx->Event(now, "node", "node/" + inv.node(),
              "rebooted (new boot id): counted as a remediation; validation follows");
  }
  if (!inv.boot_id().empty() && inv.boot_id() != r.boot_id) {
    r.boot_id = inv.boot_id();
    PersistNode(n, fx);
  }
}

// The tasks a registering agent says it runs: those of this node's live attempts are kept (a
// launch it had not confirmed counts as running); a task still being stopped stays to be
// stopped; one of an attempt the store knows is over is an orphan, stopped; one the store does
// not know at all is held, running, until an operator decides. Returns the task ids reported.
std::set<std::string> ClusterState::ReconcileReportedTasks(uint32_t n, const pb::Register& reg,
                                                           Time now, pb::Registered* ok,
                                                           Effects* fx) {
  NodeRecord& r = nodes_[n];
  r.orphans.clear();
  r.held.clear();
  std::vector<std::string> unknown;
  std::set<std::string> reported;
  for (const auto& ref : reg.running()) {
    reported.insert(ref.task_id());
    if (auto z = alloc_.stopping().find(ref.task_id());
        z != alloc_.stopping().end() && z->second.node == n) {
      ok->add_stop_tasks(ref.task_id());  // still to be stopped; keep its resources until it ends
      continue;
    }
    sched::JobId id;
    uint32_t attempt, index;
    bool wanted = false;
    if (ParseTaskId(ref.task_id(), &id, &attempt, &index)) {
      auto it = jobs_.records().find(id);
      if (it != jobs_.records().end() && it->second.attempt == attempt &&
          index < it->second.tasks.size()) {
        TaskRun& t = it->second.tasks[index];
        if (t.node == n && t.phase != TaskRun::Phase::kEnded && !job::IsFinal(it->second.state)) {
          wanted = true;
          if (t.phase == TaskRun::Phase::kLaunching) {
            pb::TaskStatus running;
            running.set_task_id(ref.task_id());
            running.set_state(pb::TaskStatus::RUNNING);
            (void)OnTaskStatus(reg.inventory().node(), running, now, fx);
          }
        }
      }
    }
    if (wanted) continue;
    if (!StoreKnowsTask(ref.task_id())) {
      unknown.push_back(ref.task_id());
      continue;
    }
    ok->add_stop_tasks(ref.task_id());
    r.orphans.insert(ref.task_id());
  }
  HoldUnknownTasks(n, unknown, now, fx);
  return reported;
}

bool ClusterState::StoreKnowsTask(const std::string& id) const {
  sched::JobId job;
  uint32_t attempt, index;
  if (!ParseTaskId(id, &job, &attempt, &index)) return false;
  auto it = jobs_.records().find(job);
  if (it == jobs_.records().end()) return false;
  const JobRecord& j = it->second;
  // An earlier attempt, or the current one of a job that ended: the store knows it is over.
  return attempt < j.attempt ||
         (attempt == j.attempt && (job::IsFinal(j.state) || index < j.tasks.size()));
}

void ClusterState::HoldUnknownTasks(uint32_t n, const std::vector<std::string>& unknown, Time now,
                                    Effects* fx) {
  if (unknown.empty()) return;
  NodeRecord& r = nodes_[n];
  r.held.insert(unknown.begin(), unknown.end());
  // Their job ids are taken, whatever the store says: a new job must not get one (its tasks would
  // share their ids with tasks already running).
  bool moved = false;
  for (const std::string& id : unknown) {
    sched::JobId job;
    uint32_t attempt, index;
    if (ParseTaskId(id, &job, &attempt, &index)) moved |= jobs_.KeepAbove(job);
  }
  if (moved)
    fx->batch.values.push_back({"meta", "next_job_id", std::to_string(jobs_.next_id()), false});
  const std::string& name = topology_->nodes()[n].name;
  std::string ids;
  for (size_t i = 0; i < unknown.size() && i < 8; ++i) ids += (i ? ", " : "") + unknown[i];
  if (unknown.size() > 8) ids += ", ...";
  fx->Event(now, "node", "node/" + name,
            "runs " + std::to_string(unknown.size()) + " task(s) the store does not know (" + ids +
                "): held, still running, and the node takes no new work until they end or an "
                "operator decides: "
                "`hangar orphans " +
                name + " --stop` stops them, `hangar orphans " + name +
                " --release` lets them run on and the node take work");
}

Status ClusterState::DecideHeldOrphans(const std::string& node, OrphanDecision decision, Time now,
                                       Effects* fx) {
  const bool stop = decision == OrphanDecision::kStop;
  auto n = topology_->FindNode(node);
  if (!n) return Status::NotFound("node '" + node + "' does not exist; `hangar nodes` lists them");
  NodeRecord& r = nodes_[*n];
  if (r.held.empty()) {
    return Status::FailedPrecondition(
        "node '" + node + "' holds no tasks unknown to the store (it is " + NodeState(*n) + ")");
  }
  std::string ids;
  for (const std::string& id : r.held) {
    ids += (ids.empty() ? "" : ", ") + id;
    if (!stop) continue;
    pb::ControllerMessage m;
    m.mutable_stop()->set_task_id(id);
    m.mutable_stop()->set_grace_ms(options_.stop_grace);
    fx->messages.push_back({node, std::move(m)});
    r.orphans.insert(id);  // stopping, as any orphan: the node waits for their ends
  }
  fx->Event(now, "node", "node/" + node,
            stop ? "the operator stopped the tasks unknown to the store (" + ids + ")"
                 : "the operator released the tasks unknown to the store (" + ids +
                       "): they run on, and the node takes work again");
  r.held.clear();
  UpdateCondition(*n);
  return Status::Ok();
}

// Tasks node n should run that its agent did not report: launch them again. A launch is
// idempotent on the agent, which answers with the task's end if it ran already.
void ClusterState::RelaunchUnreported(uint32_t n, const std::set<std::string>& reported,
                                      Effects* fx) const {
  for (sched::JobId id : jobs_.active()) {
    const JobRecord& j = jobs_.at(id);
    if (job::IsFinal(j.state)) continue;
    bool missing = false;
    for (const auto& t : j.tasks) {
      missing = missing || (t.node == n && t.phase != TaskRun::Phase::kEnded &&
                            !reported.count(TaskId(j.id, j.attempt, t.index)));
    }
    if (missing) LaunchAll(j, fx);  // LaunchAll sends only tasks still launching
  }
}

void ClusterState::OnDisconnect(const std::string& node, Time now) {
  (void)now;
  auto n = topology_->FindNode(node);
  if (!n) return;
  nodes_[*n].connected = false;
  UpdateCondition(*n);
}

bool ClusterState::OnHeartbeat(const std::string& node, const pb::Heartbeat& hb, Time now,
                               Effects* fx) {
  auto n = topology_->FindNode(node);
  if (!n) return false;
  NodeRecord& r = nodes_[*n];
  if (!r.registered || r.lost) return false;  // it must register (again) first
  r.last_heartbeat = std::max(r.last_heartbeat, now);
  nodes_.hearing().Observe(&r.clock, hb.time_ms(), now);
  ObserveTelemetry(*n, hb, now);
  if (hb.terminals_size() > 0) ObserveTerminals(hb, now);
  // `now` is when the heartbeat was taken in, after the agent sent it: the lease the agent counts
  // from its sending ends no later than this one.
  if (options_.node_lease > 0 && hb.lease_clock_ms() > 0) {
    r.lease_until = std::max(r.lease_until, now + options_.node_lease);
    if (fx) {
      pb::ControllerMessage m;
      pb::LeaseGrant* g = m.mutable_lease();
      g->set_seq(hb.seq());
      g->set_lease_clock_ms(hb.lease_clock_ms());
      g->set_lease_ms(options_.node_lease);
      fx->messages.push_back({node, std::move(m)});
    }
  }
  return true;
}

Status ClusterState::CheckTaskOwner(const std::string& node, const std::string& task_id) const {
  auto n = topology_->FindNode(node);
  if (!n || !nodes_[*n].registered) {
    return Status::PermissionDenied("a report on task " + task_id + " from '" + node +
                                    "', which is not a registered node of this cluster");
  }
  auto z = alloc_.stopping().find(task_id);
  if (z != alloc_.stopping().end()) {
    if (z->second.node == *n) return Status::Ok();
    return Status::PermissionDenied("node " + node + " reported task " + task_id +
                                    ", which runs on " + topology_->nodes()[z->second.node].name);
  }
  sched::JobId id;
  uint32_t attempt, index;
  if (!ParseTaskId(task_id, &id, &attempt, &index)) return Status::Ok();  // nobody's: ignored
  auto it = jobs_.records().find(id);
  // Another attempt's task, or a job that is gone: old news from a node that was away, ignored.
  if (it == jobs_.records().end() || it->second.attempt != attempt ||
      index >= it->second.tasks.size())
    return Status::Ok();
  const TaskRun& t = it->second.tasks[index];
  if (t.node == *n) return Status::Ok();
  return Status::PermissionDenied("node " + node + " reported task " + task_id +
                                  ", which was placed on " + topology_->nodes()[t.node].name);
}

Status ClusterState::OnTaskStatus(const std::string& node, const pb::TaskStatus& st, Time now,
                                  Effects* fx) {
  const bool ended =
      st.state() == pb::TaskStatus::EXITED || st.state() == pb::TaskStatus::FAILED_TO_START;
  auto n = topology_->FindNode(node);
  if (n && nodes_[*n].orphans.count(st.task_id())) {
    if (!ended) return Status::Ok();
    nodes_[*n].orphans.erase(st.task_id());
    if (nodes_[*n].orphans.empty()) UpdateCondition(*n);
    return Status::Ok();
  }
  if (n && nodes_[*n].held.count(st.task_id())) {
    if (!ended) return Status::Ok();
    nodes_[*n].held.erase(st.task_id());
    fx->Event(now, "node", "node/" + node,
              "task " + st.task_id() + ", unknown to the store, ended by itself");
    if (nodes_[*n].held.empty()) UpdateCondition(*n);
    return Status::Ok();
  }
  // A node reports only on the tasks placed on it: a forged "exited 0" for a task elsewhere
  // would free GPUs whose processes still run, and the next job would share them.
  HANGAR_RETURN_IF_ERROR(CheckTaskOwner(node, st.task_id()));
  auto z = alloc_.stopping().find(st.task_id());
  if (z != alloc_.stopping().end()) {
    if (ended) {
      EndZombie(z);
      dirty_ = true;
    }
    return Status::Ok();
  }
  sched::JobId id;
  uint32_t attempt, index;
  if (!ParseTaskId(st.task_id(), &id, &attempt, &index)) return Status::Ok();
  auto it = jobs_.records().find(id);
  if (it == jobs_.records().end() || it->second.attempt != attempt ||
      index >= it->second.tasks.size())
    return Status::Ok();
  JobRecord& j = it->second;
  TaskRun& t = j.tasks[index];
  if (t.phase == TaskRun::Phase::kEnded) return Status::Ok();  // old news
  if (!ended) {
    if (st.has_preflight() && st.preflight().ok()) PreflightPassed(j, t, st.preflight(), now, fx);
    MarkTaskRunning(j, t, now, fx);
    return Status::Ok();
  }
  EndReportedTask(j, t, st, now, fx);
  return Status::Ok();
}

// A task's RUNNING report: the job runs once none of its tasks is still launching.
void ClusterState::MarkTaskRunning(JobRecord& j, TaskRun& t, Time now, Effects* fx) {
  jobs_.TouchView(j.id);
  t.phase = TaskRun::Phase::kRunning;
  if (j.state != JobState::kStarting) return;
  for (const auto& other : j.tasks) {
    if (other.phase == TaskRun::Phase::kLaunching) return;
  }
  jobs_.Move(j, JobState::kRunning, "every task running");
  if (!j.started) j.started = now;
  goodput_.Running(j.id, j.attempt, now);
  fx->Event(now, "job", "job/" + std::to_string(j.id),
            "running (" + std::to_string(j.tasks.size()) + " tasks)");
  Persist(j, fx);
}

// A task's end (it exited, or never started), as its agent reported it.
void ClusterState::EndReportedTask(JobRecord& j, TaskRun& t, const pb::TaskStatus& st, Time now,
                                   Effects* fx) {
  jobs_.TouchView(j.id);
  const std::string task = "task " + std::to_string(t.index);
  if (st.agent_exiting() && !job::IsFinal(j.state)) {
    // Its agent was stopped and took the task with it (`hangar dev` stopped with Ctrl-C): the
    // job did not fail; it runs again, whole, from its last checkpoint. EndTask marks it ended
    // and frees what it held (marked ended first, it freed nothing: the GPUs stayed held).
    t.exit_code = st.exit_code();
    t.signal = st.signal();
    t.message = st.message();
    EndTask(j, t, now, fx);
    Requeue(j,
            task + " was stopped when node " + topology_->nodes()[t.node].name + "'s agent exited",
            now, fx);
    return;
  }
  const bool never_started = st.state() == pb::TaskStatus::FAILED_TO_START;
  // A task that ran and ended at once may be heard of first by its exit (its agent's reaper wrote
  // before the launch's RUNNING): the job did start, by this moment at the latest.
  if (!never_started && !j.started) j.started = now;
  t.exit_code = never_started ? 127 : st.exit_code();
  t.signal = st.signal();
  t.stopped = st.stopped();
  t.message = st.message();
  EndTask(j, t, now, fx);
  if (st.has_preflight() && !st.preflight().ok() && !st.stopped()) {
    // Its gang's preflight failed: the job did not fail; the node named is replaced.
    PreflightFailed(j, st.preflight(), now, fx);
    Persist(j, fx);
    return;
  }
  if (never_started)
    fx->Event(now, "job", "job/" + std::to_string(j.id),
              task + " failed to start: " + st.message());
  FinishIfDone(j, now, fx);
  Persist(j, fx);
}

Duration ClusterState::ReconnectGrace() const {
  if (options_.reconnect_grace >= 0)
    return std::max(options_.reconnect_grace, options_.heartbeat_timeout);
  return std::max<Duration>(options_.heartbeat_timeout,
                            10 * kSecond + static_cast<Duration>(nodes_.size()) * 5 / 2);
}

void ClusterState::CheckHeartbeats(Time now, Effects* fx) {
  EndFencedZombies(now, fx);
  nodes_.hearing().ReadLag(now);
  const Duration timeout = options_.heartbeat_timeout + nodes_.hearing().last_lag();
  // Whether the controller may believe silent nodes are gone (fleet_hearing.h).
  int64_t connected = 0, overdue = 0;
  std::vector<uint32_t> silent;  // overdue, registered or not
  const bool reconnecting = nodes_.hearing().Reconnecting(now, ReconnectGrace());
  for (uint32_t n = 0; n < nodes_.size(); ++n) {
    const NodeRecord& r = nodes_[n];
    // Restarted: a node that has not come back yet has the reconnect grace, not the timeout.
    if (r.lost || now - r.last_heartbeat <= timeout || (reconnecting && !r.registered)) {
      connected += !r.lost && r.registered;
      continue;
    }
    silent.push_back(n);
    if (r.registered) ++connected, ++overdue;
  }
  const Duration max_hold = std::max(30 * kSecond, 10 * options_.heartbeat_timeout);
  const FleetHearing::Check check = nodes_.hearing().Judge(
      overdue, connected - overdue, options_.heartbeat_interval, max_hold, now);
  if (!check.event.empty()) fx->Event(now, "controller", "controller", check.event);
  if (check.hold) return;
  for (uint32_t n : silent) {
    const NodeRecord& r = nodes_[n];
    if (!r.registered && !HasWork(n)) continue;  // never came: nothing to requeue
    LoseNode(n,
             "no heartbeat for " + FormatDuration(now - r.last_heartbeat) +
                 (nodes_.hearing().last_lag() > 0
                      ? " (heartbeats arrive up to " + FormatDuration(nodes_.hearing().last_lag()) +
                            " late)"
                      : ""),
             now, fx);
  }
}

void ClusterState::LoseNode(uint32_t n, const std::string& why, Time now, Effects* fx) {
  NodeRecord& r = nodes_[n];
  r.lost = true;
  nodes_.hearing().CountLoss();
  r.connected = false;
  r.orphans.clear();
  (void)health_.Apply(
      {health::OperatorAction::Kind::kNodeLost, n, -1, now, health::Remedy::kGpuReset, why});
  health_pass_.Touch();
  const std::string& name = topology_->nodes()[n].name;
  fx->Event(now, "node", "node/" + name, "lost: " + why);
  std::vector<sched::JobId> hit;
  for (sched::JobId id : jobs_.active()) {
    for (const auto& t : jobs_.at(id).tasks) {
      if (t.node == n && t.phase != TaskRun::Phase::kEnded) {
        hit.push_back(id);
        break;
      }
    }
  }
  for (sched::JobId id : hit) {
    JobRecord& j = jobs_.at(id);
    if (job::IsFinal(j.state)) {
      for (auto& t : j.tasks) {
        if (t.node == n && t.phase != TaskRun::Phase::kEnded) {
          t.lost = true;
          EndTask(j, t, now, fx);
        }
      }
      Persist(j, fx);
    } else {
      RequeueOrReplace(j, n, "node " + name + " lost (" + why + ")", now, fx);
      if (const Time fence = FenceEnd(n); fence > now) {
        fx->Event(now, "job", "job/" + std::to_string(id),
                  "attempt " + std::to_string(j.attempt) + " starts only after node " + name +
                      "'s lease has run out (in " + FormatDuration(fence - now) +
                      "): its tasks there may still run until the node's fence stops them");
      }
    }
  }
  // Tasks it was stopping may still run too: they count as stopped when its fence has ended.
  const Time fence = FenceEnd(n);
  for (auto it = alloc_.stopping().begin(); it != alloc_.stopping().end();) {
    if (it->second.node == n && fence > now) {
      it->second.fence_ends = std::max(it->second.fence_ends, fence);
      ++it;
    } else if (it->second.node == n) {
      ZombieEnded(alloc_.EndStopping(it++, Allocations::ShareTo::kPool));
    } else {
      ++it;
    }
  }
  UpdateCondition(n);
}

Time ClusterState::FenceEnd(uint32_t n) const {
  // What a kill needs to land once the keeper has sent it (it looks every 50 ms).
  constexpr Duration kFenceMargin = 500;
  if (options_.node_lease <= 0) return -1;
  Time end = nodes_[n].lease_until;
  // A predecessor (before a restart or failover) may have granted up to a lease before this one
  // took over.
  if (nodes_.hearing().restored_at() >= 0)
    end = std::max(end, nodes_.hearing().restored_at() + options_.node_lease);
  return end < 0 ? -1 : end + kFenceMargin;
}

void ClusterState::EndFencedZombies(Time now, Effects* fx) {
  std::vector<std::string> ended;
  for (const auto& [task, z] : alloc_.stopping()) {
    if (z.fence_ends >= 0 && now >= z.fence_ends) ended.push_back(task);
  }
  for (const std::string& task : ended) {
    auto z = alloc_.stopping().find(task);
    const std::string node = topology_->nodes()[z->second.node].name;
    sched::JobId id;
    uint32_t attempt, index;
    if (ParseTaskId(task, &id, &attempt, &index)) {
      fx->Event(now, "job", "job/" + std::to_string(id),
                "task " + task + " counts as stopped: node " + node +
                    "'s lease has run out, and its fence has "
                    "stopped its tasks by now");
    }
    EndZombie(z);
    dirty_ = true;
  }
}

void ClusterState::SettleFencedZombies(uint32_t n, const pb::Register& reg) {
  std::set<std::string> running;
  for (const auto& t : reg.running()) running.insert(t.task_id());
  std::vector<std::string> ended;
  for (auto& [task, z] : alloc_.stopping()) {
    if (z.node != n || z.fence_ends < 0) continue;
    if (running.count(task)) {
      z.fence_ends = -1;  // its lease is renewed: it ends when its agent has stopped it
    } else {
      ended.push_back(task);
    }
  }
  for (const std::string& task : ended) {
    EndZombie(alloc_.stopping().find(task));
    dirty_ = true;
  }
}

Status ClusterState::Drain(const std::string& node, const std::string& reason, Time now,
                           Effects* fx) {
  auto n = topology_->FindNode(node);
  if (!n) return Status::NotFound("node '" + node + "' does not exist; `hangar nodes` lists them");
  if (reason.empty()) return Status::InvalidArgument("say why the node is drained (--reason)");
  nodes_[*n].drained = true;
  nodes_[*n].drain_reason = reason;
  (void)health_.Apply(
      {health::OperatorAction::Kind::kDrain, *n, -1, now, health::Remedy::kGpuReset, reason});
  UpdateCondition(*n);
  PersistNode(*n, fx);
  fx->Event(now, "node", "node/" + node, "drained by the operator: " + reason);
  return Status::Ok();
}

Status ClusterState::Undrain(const std::string& node, Time now, Effects* fx) {
  auto n = topology_->FindNode(node);
  if (!n) return Status::NotFound("node '" + node + "' does not exist; `hangar nodes` lists them");
  if (!nodes_[*n].drained) {
    // Health took it out (an Xid, a bad link): undrain cannot put it back, a recorded remedy can,
    // and its validation then returns the node. Say what it is held for and which remedy fits.
    const health::NodeReport report = health_.Report(*n);
    auto held = [](health::HealthState h) {
      return h == health::HealthState::kDraining || h == health::HealthState::kQuarantined ||
             h == health::HealthState::kFailed;
    };
    std::string why, remedy;
    if (held(report.state)) {
      why =
          std::string(health::StateName(report.state)) +
          (report.conditions.empty() ? std::string() : " for " + report.conditions.front().reason);
      remedy = "--remedy reboot (or repair)";
    }
    for (const auto& g : report.gpus) {
      if (!held(g.state) || !why.empty()) continue;
      why = "GPU " + std::to_string(g.index) + " is " + std::string(health::StateName(g.state)) +
            (g.conditions.empty() ? std::string() : " for " + g.conditions.front().reason);
      remedy = "--remedy gpu-reset --gpu " + std::to_string(g.index) + " (or reboot, repair)";
    }
    if (!why.empty()) {
      return Status::FailedPrecondition(
          "node '" + node + "' is not drained by an operator: " + why +
          "; undrain does not clear a health finding: fix it, then record the fix with "
          "`hangar remediate " +
          node + " " + remedy + "`, and validation returns the node to service");
    }
    return Status::FailedPrecondition("node '" + node + "' is not drained (it is " + NodeState(*n) +
                                      "); `hangar drain` and `hangar undrain` go together");
  }
  nodes_[*n].drained = false;
  nodes_[*n].drain_reason.clear();
  (void)health_.Apply({health::OperatorAction::Kind::kUndrain, *n, -1, now});
  health_pass_.Touch();
  UpdateCondition(*n);
  PersistNode(*n, fx);
  fx->Event(now, "node", "node/" + node, "undrained by the operator");
  return Status::Ok();
}

Status ClusterState::Remediate(const std::string& node, const std::string& remedy, int gpu,
                               const std::string& note, Time now, Effects* fx) {
  auto n = topology_->FindNode(node);
  if (!n) return Status::NotFound("node '" + node + "' does not exist; `hangar nodes` lists them");
  health::Remedy r;
  if (remedy == "gpu-reset") {
    r = health::Remedy::kGpuReset;
    if (gpu < 0 || gpu >= static_cast<int>(topology_->nodes()[*n].num_gpus)) {
      return Status::InvalidArgument(
          "a GPU reset names the GPU it reset: --gpu 0.." +
          std::to_string(static_cast<int>(topology_->nodes()[*n].num_gpus) - 1));
    }
  } else if (remedy == "reboot" || remedy == "repair") {
    r = remedy == "reboot" ? health::Remedy::kNodeReboot : health::Remedy::kRepair;
    if (remedy == "reboot" && gpu >= 0) {
      return Status::InvalidArgument(
          "a reboot is of the whole node; leave out --gpu (or use gpu-reset)");
    }
  } else {
    return Status::InvalidArgument("unknown remedy '" + remedy +
                                   "'; use gpu-reset, reboot or repair");
  }
  HANGAR_RETURN_IF_ERROR(health_.Apply({health::OperatorAction::Kind::kRemediated, *n, gpu, now, r,
                                        note.empty() ? "by the operator" : note}));
  health_pass_.Touch();
  fx->Event(now, "node", "node/" + node,
            std::string("remediated: ") + remedy +
                (gpu >= 0 ? " of GPU " + std::to_string(gpu) : "") +
                (note.empty() ? "" : " (" + note + ")") + "; validation follows");
  return Status::Ok();
}

void ClusterState::ResetSafetyValve(Time now, Effects* fx) {
  (void)health_.Apply({health::OperatorAction::Kind::kResetSafetyValve, 0, -1, now});
  health_pass_.Touch();
  fx->Event(now, "health", "cluster", "safety valve reset by the operator: drains may proceed");
}

std::vector<std::vector<uint64_t>> ClusterState::JobsByNode(std::optional<uint32_t> only) const {
  std::vector<std::vector<uint64_t>> by_node(only ? 1 : nodes_.size());
  for (sched::JobId id : jobs_.active()) {  // ascending: each node's list comes out in id order
    const JobRecord& j = jobs_.at(id);
    for (const auto& t : j.tasks) {
      if (t.phase == TaskRun::Phase::kEnded || (only && t.node != *only)) continue;
      auto& list = by_node[only ? 0 : t.node];
      if (list.empty() || list.back() != id) list.push_back(id);
    }
  }
  return by_node;
}

// One pass over the running jobs for the whole list, not one per node (10,240 busy nodes took a
// minute that way).
std::vector<api::NodeView> ClusterState::ListNodes() const {
  std::vector<std::vector<uint64_t>> jobs = JobsByNode(std::nullopt);
  std::vector<api::NodeView> out;
  out.reserve(nodes_.size());
  for (uint32_t n = 0; n < nodes_.size(); ++n) out.push_back(NodeViewOf(n, std::move(jobs[n])));
  return out;
}

StatusOr<api::NodeView> ClusterState::GetNode(const std::string& name) const {
  auto found = topology_->FindNode(name);
  if (!found)
    return Status::NotFound("node '" + name + "' does not exist; `hangar nodes` lists them");
  return NodeViewOf(*found, std::move(JobsByNode(*found)[0]));
}

Status ClusterState::AgentCan(const std::string& node, AgentFeature f) const {
  auto n = topology_->FindNode(node);
  if (!n) return Status::NotFound("node '" + node + "' is not in this cluster");
  const NodeRecord& r = nodes_[*n];
  if (r.agent_features & Bit(f)) return Status::Ok();
  return Status::FailedPrecondition(AgentLacks(node, r.software.agent, f));
}

api::NodeView ClusterState::NodeViewOf(uint32_t n, std::vector<uint64_t> jobs) const {
  const auto& info = topology_->nodes()[n];
  const NodeRecord& r = nodes_[n];
  const auto& u = alloc_.usage().node(n);
  api::NodeView v;
  v.name = info.name;
  v.state = NodeState(n);
  v.reason = r.drained ? r.drain_reason : "";
  if (v.reason.empty() && spares_.IsSpare(n))
    v.reason =
        "hot spare: takes only opportunistic work until it replaces a failed node of a "
        "gang (which evicts that work)";
  v.model = info.num_gpus ? topology_->models()[info.model] : "";
  v.leaf = topology_->leaves()[info.leaf].name;
  v.spine = topology_->spines()[info.spine].name;
  v.gpus = info.num_gpus;
  int64_t free_milli = 0;
  for (uint32_t g = info.first_gpu; g < info.first_gpu + info.num_gpus; ++g) {
    if (alloc_.usage().gpu_available(g) && !topology_->gpus()[g].mig)
      free_milli += alloc_.usage().gpu_free_milli(g);
  }
  v.gpus_free = static_cast<double>(free_milli) / 1000.0;
  v.milli_cpu = info.milli_cpu;
  v.milli_cpu_free = u.free_cpu;
  v.memory_mib = info.memory_mib;
  v.memory_mib_free = u.free_memory;
  v.connected = r.connected;
  v.last_heartbeat = r.last_heartbeat;
  v.address = r.address;
  const health::NodeReport report = health_.Report(n);
  AddHealthConditions(report, &v);
  if (const std::string* d = discovered_fabric_.DisagreementOf(info.name)) {
    v.conditions.push_back("TopologyMismatch: " + *d);
  }
  AddRecordConditions(r, info.name, &v);
  v.artifacts = static_cast<int64_t>(r.artifacts.size());
  v.artifact_bytes = r.artifact_bytes;
  v.artifact_budget = r.artifact_budget;
  v.data_url = r.data_url;
  if (v.reason.empty() && !report.conditions.empty()) v.reason = report.conditions.front().reason;
  if (v.reason.empty() && !r.registered) {
    v.reason = "no agent has connected yet: start `hangar agent` on it";
  }
  v.jobs = std::move(jobs);
  return v;
}

}  // namespace hangar::controller
