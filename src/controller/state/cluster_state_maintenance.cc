// ClusterState: rolling maintenance (docs/maintenance.md). The run's state machine is
// maintenance::RollingMaintenance; here its actions are carried out with the controller's own
// doors -- Drain (the checkpoint signal, the requeue), the agent's MaintenanceCommand, Undrain
// (and the validation before work) -- and each run it changes is stored, key-value table
// `maintenance`, so that a restarted controller resumes it.
#include "controller/state/cluster_state.h"

namespace hangar::controller {

namespace {
maintenance::CommandOutcome OutcomeOf(const pb::MaintenanceResult& r) {
  maintenance::CommandOutcome o;
  o.refused = r.refused();
  o.exit_code = r.exit_code();
  o.signal = r.signal();
  o.timed_out = r.timed_out();
  o.output = r.output();
  o.error = r.error();
  o.took = r.duration_ms();
  return o;
}

std::string Subject(const maintenance::Run& r) { return "maintenance/" + std::to_string(r.id); }
}  // namespace

maintenance::NodeFacts ClusterState::MaintenanceFacts(const std::string& name) const {
  maintenance::NodeFacts f;
  f.validation_required = options_.require_validation;
  auto n = topology_->FindNode(name);
  if (!n) {
    f.unfit = "it is no longer in cluster.yaml";
    return f;
  }
  const NodeRecord& r = nodes_[*n];
  f.connected = r.connected && !r.lost;
  f.drained = r.drained;
  f.has_work = HasWork(*n);
  const std::string state = NodeState(*n);
  f.ready = state == "ready";
  const health::HealthState h = health_.node_state(*n);
  const health::NodeReport report = health_.Report(*n);
  if (!r.drained && (h == health::HealthState::kQuarantined || h == health::HealthState::kFailed ||
                     h == health::HealthState::kDraining)) {
    f.unfit = "it is " + state +
              (report.conditions.empty() ? "" : " for " + report.conditions.front().reason);
  }
  for (const auto& c : report.conditions) {
    if (c.type == "validation_error") f.unfit = "its validation could not run: " + c.reason;
  }
  f.healthy_after_restore = h == health::HealthState::kHealthy && !r.drained;
  return f;
}

void ClusterState::ApplyMaintenance(const maintenance::Run& r, const maintenance::Actions& a,
                                    Time now, Effects* fx) {
  for (const std::string& node : a.drain) {
    Status s = Drain(node, maintenance::RollingMaintenance::DrainReason(r), now, fx);
    if (!s.ok()) fx->Event(now, "maintenance", Subject(r), node + ": " + s.message());
  }
  std::vector<pb::MaintenanceResult> unable;  // sends to agents that would drop the command
  for (const std::string& node : a.send) {
    if (Status can = AgentCan(node, AgentFeature::kMaintenance); !can.ok()) {
      pb::MaintenanceResult& res = unable.emplace_back();
      res.set_id(r.CommandId(node));
      res.set_refused(true);
      res.set_error(can.message());
      continue;
    }
    pb::ControllerMessage m;
    pb::MaintenanceCommand* c = m.mutable_maintenance_command();
    c->set_id(r.CommandId(node));
    c->set_command(r.command);
    c->set_timeout_ms(r.timeout);
    fx->messages.push_back({node, std::move(m)});
  }
  for (const std::string& node : a.undrain) {
    auto n = topology_->FindNode(node);
    // Only the run's own drain is lifted: an operator who drained it since keeps it drained.
    if (!n || !nodes_[*n].drained ||
        nodes_[*n].drain_reason != maintenance::RollingMaintenance::DrainReason(r)) {
      continue;
    }
    (void)Undrain(node, now, fx);
  }
  for (const std::string& e : a.events) fx->Event(now, "maintenance", Subject(r), e);
  if (a.changed) {
    fx->batch.values.push_back(
        {"maintenance", std::to_string(r.id), maintenance::ToJson(r).dump(), false});
  }
  for (uint64_t id : maintenance_.Forgotten())
    fx->batch.values.push_back({"maintenance", std::to_string(id), "", true});
  if (!a.drain.empty() || !a.undrain.empty()) {
    health_pass_.Touch();
    dirty_ = true;
  }
  // An agent that re-registered older since the run began: refused, as its agent would have.
  for (const pb::MaintenanceResult& res : unable) {
    uint64_t id = 0;
    std::string node;
    if (maintenance::ParseCommandId(res.id(), &id, &node)) {
      (void)OnMaintenanceResult(node, res, now, fx);
    }
  }
}

StatusOr<nlohmann::json> ClusterState::StartMaintenance(const Principal& p,
                                                        const nlohmann::json& body, Time now,
                                                        Effects* fx) {
  HANGAR_ASSIGN_OR_RETURN(maintenance::Run r, maintenance::ParseRequest(body, *topology_));
  for (const auto& n : r.nodes) {
    if (Status can = AgentCan(n.node, AgentFeature::kMaintenance); !can.ok()) {
      return Status::FailedPrecondition(can.message() + "; or leave " + n.node + " out of --nodes");
    }
  }
  r.created_by = p.user;
  HANGAR_ASSIGN_OR_RETURN(const maintenance::Run* started, maintenance_.Start(std::move(r), now));
  fx->Event(now, "maintenance", Subject(*started),
            "started by " + p.Describe() + " on " + std::to_string(started->nodes.size()) +
                " node(s) (" + started->selector + "), " + std::to_string(started->batch_size) +
                " at a time: " + started->command);
  const uint64_t id = started->id;
  AdvanceMaintenance(now, fx);  // the first batch drains now, and the run is stored
  return maintenance::ToJson(*maintenance_.Find(id));
}

void ClusterState::AdvanceMaintenance(Time now, Effects* fx) {
  const maintenance::Run* r = maintenance_.Active();
  if (!r) return;
  maintenance::Actions a =
      maintenance_.Advance([this](const std::string& n) { return MaintenanceFacts(n); }, now);
  ApplyMaintenance(*r, a, now, fx);
}

Status ClusterState::OnMaintenanceResult(const std::string& node, const pb::MaintenanceResult& m,
                                         Time now, Effects* fx) {
  auto a = maintenance_.OnOutcome(node, m.id(), OutcomeOf(m), now);
  if (!a.ok()) return a.status();  // old news (an answer sent again), or not this node's
  uint64_t id = 0;
  std::string ignored;
  (void)maintenance::ParseCommandId(m.id(), &id, &ignored);
  ApplyMaintenance(*maintenance_.Find(id), *a, now, fx);
  return Status::Ok();
}

Status ClusterState::CancelMaintenance(uint64_t id, const Principal& p, Time now, Effects* fx) {
  HANGAR_ASSIGN_OR_RETURN(maintenance::Actions a, maintenance_.Cancel(id, p.Describe(), now));
  ApplyMaintenance(*maintenance_.Find(id), a, now, fx);
  return Status::Ok();
}

StatusOr<nlohmann::json> ClusterState::MaintenanceJson(uint64_t id) const {
  const maintenance::Run* r = id == 0 ? maintenance_.Latest() : maintenance_.Find(id);
  if (!r) {
    return Status::NotFound(id == 0 ? std::string("no maintenance run yet: start one with "
                                                  "`hangar maintain --nodes ... --batch N --run "
                                                  "COMMAND`")
                                    : "maintenance run " + std::to_string(id) +
                                          " does not exist; `hangar maintain list` shows them");
  }
  return maintenance::ToJson(*r);
}

nlohmann::json ClusterState::MaintenanceListJson() const {
  nlohmann::json out = nlohmann::json::array();
  for (auto it = maintenance_.all().rbegin(); it != maintenance_.all().rend(); ++it) {
    nlohmann::json j = maintenance::ToJson(it->second);
    j.erase("nodes");  // the list is a summary; GET /v1/maintenance/ID has every node
    out.push_back(std::move(j));
  }
  return {{"runs", out}};
}

void ClusterState::RestoreMaintenance(const KeyValueRow& row) {
  auto j = nlohmann::json::parse(row.value, nullptr, false);
  if (j.is_discarded()) return;
  auto r = maintenance::FromJson(j);
  if (r.ok()) maintenance_.Restore(std::move(*r));
}

}  // namespace hangar::controller
