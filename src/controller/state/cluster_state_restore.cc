// ClusterState: rebuilding after a restart from what the store holds.
#include "controller/state/cluster_state.h"
#include "controller/state/job_lifecycle.h"

namespace hangar::controller {

using job::JobState;

namespace {

// The current attempt's assignment and task phases, from PlacementJson().
Status ParsePlacement(const std::string& text, const cluster::Topology& t, JobRecord* j) {
  auto p = nlohmann::json::parse(text, nullptr, false);
  if (p.is_discarded() || !p.contains("tasks"))
    return Status::Internal("job " + std::to_string(j->id) + ": unreadable placement");
  j->master_port = p.value("master_port", 0);
  for (const auto& task : p["tasks"]) {
    auto node = t.FindNode(task.value("node", ""));
    if (!node)
      return Status::Internal("job " + std::to_string(j->id) + ": node '" + task.value("node", "") +
                              "' is no longer in the cluster");
    cluster::TaskPlacement tp;
    tp.node = *node;
    tp.group = task.value("group", uint16_t{0});
    tp.replica = task.value("replica", 0u);
    tp.milli_cpu = task.value("cpu", int64_t{0});
    tp.memory_mib = task.value("memory", int64_t{0});
    tp.first_grant = static_cast<uint32_t>(j->assignment.grants.size());
    for (const auto& g : task["grants"]) {
      const uint32_t index = g[0].get<uint32_t>();
      if (index >= t.nodes()[*node].num_gpus)
        return Status::Internal("job " + std::to_string(j->id) + ": GPU index out of range");
      cluster::GpuGrant grant{t.nodes()[*node].first_gpu + index, g[1].get<int32_t>(),
                              g[2].get<int64_t>()};
      if (g.size() >= 5) {  // a MIG instance: its start slice and shape
        grant.mig_start = g[3].get<int8_t>();
        grant.mig_shape = g[4].get<uint8_t>();
      }
      j->assignment.grants.push_back(grant);
    }
    tp.end_grant = static_cast<uint32_t>(j->assignment.grants.size());
    j->assignment.tasks.push_back(tp);
    TaskRun run;
    run.index = static_cast<uint32_t>(j->tasks.size());
    run.node = *node;
    run.phase = task.value("ended", false) ? TaskRun::Phase::kEnded : TaskRun::Phase::kLaunching;
    run.exit_code = task.value("exit_code", 0);
    run.signal = task.value("signal", 0);
    run.stopped = task.value("stopped", false);
    run.lost = task.value("lost", false);
    j->tasks.push_back(run);
  }
  return Status::Ok();
}

}  // namespace

void ClusterState::RestoreHealth(uint32_t n, const nlohmann::json& h) {
  auto restore = [&](int gpu, const nlohmann::json& s) {
    auto state = health::HealthState::kHealthy;
    const std::string name = s.value("state", "healthy");
    for (int k = 0; k <= static_cast<int>(health::HealthState::kFailed); ++k) {
      if (health::StateName(static_cast<health::HealthState>(k)) == name)
        state = static_cast<health::HealthState>(k);
    }
    if (state != health::HealthState::kHealthy &&
        state != health::HealthState::kPendingValidation) {
      (void)health_.Restore(n, gpu, state, s.value("since", Time{0}), s.value("reason", ""));
      if (gpu >= 0 && gpu < static_cast<int>(topology_->nodes()[n].num_gpus) &&
          state == health::HealthState::kDraining) {
        health_pass_.draining_gpus().insert(topology_->nodes()[n].first_gpu +
                                            static_cast<uint32_t>(gpu));
      }
    }
  };
  if (!h.is_object()) return;
  restore(-1, h);
  int gpu = 0;
  for (const auto& g : h.value("gpus", nlohmann::json::array())) restore(gpu++, g);
}

Status ClusterState::Restore(const StoreContents& c, Time now) {
  HANGAR_RETURN_IF_ERROR(RestoreValues(c.values));
  RestoreNodes(c.nodes);
  // Every agent gets the reconnect grace to come back (ReconnectGrace: the fleet reconnects at
  // once), then the heartbeat timeout as usual.
  for (auto& r : nodes_) r.last_heartbeat = now;
  nodes_.hearing().OpenReconnectGrace(now);
  for (const auto& row : c.jobs) HANGAR_RETURN_IF_ERROR(RestoreJob(row));
  jobs_.ReindexUsers();
  // The spare pool starts from cluster.yaml's designation: a designated spare that holds work was
  // taken before the restart (a gang runs on it), so it is a node like any other, and its domain
  // is short one until RefillSpares makes an idle node a spare again.
  for (uint32_t n = 0; n < nodes_.size(); ++n) {
    if (spares_.IsSpare(n) && HasWork(n)) spares_.Take(n);
  }
  for (uint32_t n = 0; n < nodes_.size(); ++n) UpdateCondition(n);
  jobs_.interned().DropWarm();
  dirty_ = true;
  return Status::Ok();
}

// The key-value rows: the next job id, the applied queues, idempotency keys, usage.
Status ClusterState::RestoreValues(const std::vector<KeyValueRow>& values) {
  for (const auto& v : values) {
    if (v.table == "meta" && v.key == "next_job_id") jobs_.set_next_id(std::stoull(v.value));
    if (v.table == "queue" && v.key == "tree") {
      // The queues last applied; a tree the cluster can no longer honour (nodes left
      // cluster.yaml) is reported and the previous default kept, so the controller still starts.
      auto specs = job::ParseQueues(v.value, "the stored queue tree");
      auto tree = specs.ok()
                      ? sched::queue::QueueTree::Build(*specs, *topology_)
                      : StatusOr<std::shared_ptr<const sched::queue::QueueTree>>(specs.status());
      if (!tree.ok())
        return Status::FailedPrecondition(
            "the applied queues no longer fit this cluster: " + tree.status().message() +
            "; fix cluster.yaml or the store");
      UseQueues(std::move(*specs), *tree);
    }
    if (v.table == IdempotencyBook::kTable) idempotency_.Restore(v);
    if (v.table == "reservation") RestoreReservation(v);
    if (v.table == "maintenance") RestoreMaintenance(v);
    if (v.table == "usage") {
      auto j = nlohmann::json::parse(v.value, nullptr, false);
      if (!j.is_discarded()) queues_.Account(AttemptUsage::FromJson(j));
    }
  }
  return Status::Ok();
}

// The node rows: drains, boot ids and health (a node that left cluster.yaml is skipped).
void ClusterState::RestoreNodes(const std::vector<NodeRow>& rows) {
  for (const auto& row : rows) {
    auto n = topology_->FindNode(row.name);
    if (!n) continue;
    auto s = nlohmann::json::parse(row.state_json, nullptr, false);
    if (s.is_discarded()) continue;
    nodes_[*n].drained = s.value("drained", false);
    nodes_[*n].drain_reason = s.value("drain_reason", "");
    nodes_[*n].boot_id = s.value("boot_id", "");
    const nlohmann::json health = s.value("health", nlohmann::json::object());
    // A node that only an operator's drain (or a maintenance run's) held out, with no fault of its
    // own: its cordon comes back, so that undrain returns it through validation as before the
    // restart, rather than a quarantine that waits for a remedy.
    if (nodes_[*n].drained && health.is_object() && health.value("reason", "").empty()) {
      (void)health_.Apply({health::OperatorAction::Kind::kDrain, *n, -1,
                           health.value("since", Time{0}), health::Remedy::kGpuReset,
                           nodes_[*n].drain_reason});
      nlohmann::json gpus_only = {{"state", "healthy"},
                                  {"gpus", health.value("gpus", nlohmann::json::array())}};
      RestoreHealth(*n, gpus_only);
      continue;
    }
    RestoreHealth(*n, health);
  }
}

// One job row, in id order: its record, its array, the resources its live tasks hold.
Status ClusterState::RestoreJob(const JobRow& row) {
  // Parsed once per distinct stored text (the jobs of a sweep share one), or by a standby ahead.
  HANGAR_ASSIGN_OR_RETURN(
      const SpecInterner::Warmed* warm,
      jobs_.interned().Warm(row.spec, row.id, options_.sealer.get(), *topology_));
  auto state = job::ParseJobState(row.state);
  if (!state)
    return Status::Internal("job " + std::to_string(row.id) + " has unknown state '" + row.state +
                            "'");
  JobRecord j;
  j.id = row.id;
  j.request = warm->request;
  j.spec = warm->spec;
  JobLifecycle::Restore(j, *state);
  j.submitted = row.submitted;
  j.started = row.started;
  j.ended = row.ended;
  j.attempt = row.attempt;
  j.restarts = row.restarts;
  j.message = row.message;
  if (!row.extra_json.empty()) {
    auto extra = nlohmann::json::parse(row.extra_json, nullptr, false);
    if (extra.is_object()) {
      j.last_checkpoint = extra.value("last_checkpoint", Time{0});
      j.checkpoint_path = extra.value("checkpoint_path", "");
      j.idle_gpu_ms = extra.value("idle_gpu_ms", int64_t{0});
      j.staging_ms = extra.value("staging_ms", Duration{0});
      j.staging_gpu_ms = extra.value("staging_gpu_ms", int64_t{0});
      j.array_id = extra.value("array_id", uint64_t{0});
      j.array_index = extra.value("array_index", int64_t{-1});
      j.held = extra.contains("held_by") && j.state == JobState::kPending;
      j.held_by = extra.value("held_by", "");
      if (extra.contains("goodput")) goodput_.Restore(j.id, extra["goodput"]);
    }
  }
  if (j.array_id) gates_.Add(j.array_id, j.id, j.spec->spec.array.max_running);
  const int leaf = queues_.tree().FindLeaf(j.spec->spec.queue);
  if (leaf < 0 && !job::IsFinal(j.state)) {
    return Status::FailedPrecondition("job " + std::to_string(row.id) + " is in queue '" +
                                      j.spec->spec.queue +
                                      "', which the controller does not have; start it with that "
                                      "queue (--queues) or apply a queues file that has it");
  }
  j.queue = leaf >= 0 ? static_cast<uint32_t>(leaf) : UINT32_MAX;
  jobs_.KeepAbove(row.id);
  if (!row.placement_json.empty())
    HANGAR_RETURN_IF_ERROR(ParsePlacement(row.placement_json, *topology_, &j));
  for (auto& t : j.tasks) {
    if (t.phase == TaskRun::Phase::kEnded) continue;
    HANGAR_RETURN_IF_ERROR(alloc_.usage().Allocate(cluster::TaskShare(j.assignment, t.index)));
    j.live_tasks++;
  }
  jobs_.Restore(std::move(j));
  return Status::Ok();
}

void ClusterState::OpenReconnectGrace(Time now) {
  for (auto& r : nodes_) {
    if (!r.registered) r.last_heartbeat = now;
  }
  nodes_.hearing().OpenReconnectGrace(now);
}

Status ClusterState::WarmSpecs(const std::vector<const JobRow*>& rows,
                               const std::atomic<bool>* cancel) {
  for (const JobRow* row : rows) {
    if (cancel && cancel->load(std::memory_order_relaxed))
      return Status::Aborted("a takeover began");
    HANGAR_RETURN_IF_ERROR(
        jobs_.interned().Warm(row->spec, row->id, options_.sealer.get(), *topology_).status());
  }
  return Status::Ok();
}

}  // namespace hangar::controller
