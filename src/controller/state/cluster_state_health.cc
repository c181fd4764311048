// ClusterState: closing the loop between the health rules (src/health) and the cluster -- feeding
// telemetry in, and acting on what comes out: drains that requeue gangs whole, validations,
// which nodes and GPUs may take work, and the events that explain it all.
#include <algorithm>

#include "controller/state/cluster_state.h"

namespace hangar::controller {

namespace {

health::GpuSample ToSample(const pb::GpuTelemetry& t, Time at) {
  health::GpuSample s;
  s.index = static_cast<uint16_t>(t.index());
  s.at = at;
  s.util_pct = t.util_pct();
  s.memory_used_mib = t.memory_used_mib();
  s.memory_total_mib = t.memory_total_mib();
  s.temperature_c = t.temperature_c();
  s.power_mw = t.power_mw();
  s.sm_clock_mhz = t.sm_clock_mhz();
  s.clock_event_reasons = t.clock_event_reasons();
  s.pcie_gen = t.pcie_gen();
  s.pcie_width = t.pcie_width();
  s.pcie_gen_max = t.pcie_gen_max();
  s.pcie_width_max = t.pcie_width_max();
  s.pcie_replay_count = t.pcie_replay_count();
  s.ecc_sbe_volatile = t.ecc_sbe_volatile();
  s.ecc_dbe_volatile = t.ecc_dbe_volatile();
  s.remapped_rows_correctable = t.remapped_rows_correctable();
  s.remapped_rows_uncorrectable = t.remapped_rows_uncorrectable();
  s.remap_pending = t.remap_pending();
  s.remap_failure = t.remap_failure();
  s.retired_pages = t.retired_pages();
  s.nvlink_down = t.nvlink_down();
  s.nvlink_errors = t.nvlink_errors();
  s.lost = t.lost();
  s.thermal_violation_ms = t.thermal_violation_ms();
  s.hw_slowdown_events = t.hw_slowdown_events();
  return s;
}

void Remember(const pb::GpuTelemetry& t, GpuTelemetry* g) {
  g->util_pct = t.util_pct();
  g->mem_util_pct = t.mem_util_pct();
  g->temperature_c = t.temperature_c();
  g->memory_temperature_c = t.memory_temperature_c();
  g->power_mw = t.power_mw();
  g->energy_mj = t.energy_mj();
  g->sm_clock_mhz = t.sm_clock_mhz();
  g->mem_clock_mhz = t.mem_clock_mhz();
  g->fb_used_mib = t.memory_used_mib();
  g->fb_free_mib =
      t.memory_total_mib() > t.memory_used_mib() ? t.memory_total_mib() - t.memory_used_mib() : 0;
  g->pcie_replays = t.pcie_replay_count();
  g->pcie_gen = t.pcie_gen();
  g->pcie_width = t.pcie_width();
  g->ecc_sbe = t.ecc_sbe_volatile();
  g->ecc_dbe = t.ecc_dbe_volatile();
  g->remapped_corr = t.remapped_rows_correctable();
  g->remapped_unc = t.remapped_rows_uncorrectable();
  g->remap_failure = t.remap_failure();
}

// hangar-validate's JSON (docs/health.md) as the rules read it.
health::ValidationReport ParseValidation(const pb::ValidationResult& r, Time at) {
  health::ValidationReport v;
  v.at = at;
  auto j = nlohmann::json::parse(r.json(), nullptr, false);
  if (!r.ok() || j.is_discarded() || !j.is_object() || j.contains("error")) {
    v.ran = false;
    v.error = j.is_object() && j.contains("error") ? j["error"].dump() : "validation did not run";
    return v;
  }
  for (const auto& g : j.value("gpus", nlohmann::json::array())) {
    health::GpuBenchmark b;
    b.index = g.value("index", uint16_t{0});
    b.gemm_tflops = g.value("gemm_tflops", 0.0);
    b.mem_bw_gbs = g.value("mem_bw_gbs", 0.0);
    b.h2d_gbs = g.value("h2d_gbs", 0.0);
    b.d2h_gbs = g.value("d2h_gbs", 0.0);
    v.gpus.push_back(b);
    if (v.gpu_model.empty()) v.gpu_model = g.value("model", "");
  }
  v.nccl_busbw_gbs = j.value("nccl_busbw_gbs", 0.0);
  return v;
}

// The node's latest validation could not run (hangar-validate missing or broken, no GPU).
bool ValidationCouldNotRun(const health::HealthEngine& health, uint32_t n) {
  for (const auto& c : health.Report(n).conditions) {
    if (c.type == "validation_error") return true;
  }
  return false;
}

}  // namespace

void ClusterState::OnGpuEvent(const std::string& node, const pb::GpuEvent& e, Time now) {
  auto n = topology_->FindNode(node);
  if (!n) return;
  health::GpuEvent ev;
  ev.index = static_cast<uint16_t>(e.index());
  ev.kind = e.kind() == "ecc_dbe"   ? health::GpuEvent::Kind::kEccDbe
            : e.kind() == "ecc_sbe" ? health::GpuEvent::Kind::kEccSbe
                                    : health::GpuEvent::Kind::kXid;
  ev.code = e.code();
  ev.at = now;  // the controller's clock: agents' clocks are not trusted
  ev.message = e.message();
  (void)health_.ObserveGpuEvent(*n, ev);
  if (ev.kind == health::GpuEvent::Kind::kXid && e.index() < nodes_[*n].gpus.size()) {
    nodes_[*n].gpus[e.index()].last_xid = static_cast<uint32_t>(e.code());
  }
  health_pass_.Touch();
}

void ClusterState::OnValidation(const std::string& node, const pb::ValidationResult& r, Time now) {
  auto n = topology_->FindNode(node);
  if (!n) return;
  nodes_[*n].validation_asked = false;
  (void)health_.ObserveValidation(*n, ParseValidation(r, now));
  maintenance_.NoteValidation(node);  // a node back from its maintenance command may now return
  health_pass_.Touch();
}

void ClusterState::ObserveTelemetry(uint32_t n, const pb::Heartbeat& hb, Time now) {
  NodeRecord& r = nodes_[n];
  for (const auto& t : hb.gpus()) {
    (void)health_.ObserveGpu(n, ToSample(t, now));
    if (t.index() < r.gpus.size()) Remember(t, &r.gpus[t.index()]);
  }
  for (const auto& p : hb.ib_ports()) {
    health::IbPortSample s;
    s.device = p.device();
    s.port = p.port();
    s.at = now;
    s.state = p.state();
    s.phys_state = p.phys_state();
    s.counters.insert(p.counters().begin(), p.counters().end());
    (void)health_.ObserveIbPort(n, s);
  }
}

bool ClusterState::HasWork(uint32_t n) const {
  for (sched::JobId id : jobs_.active()) {
    for (const auto& t : jobs_.at(id).tasks) {
      if (t.node == n && t.phase != TaskRun::Phase::kEnded) return true;
    }
  }
  for (const auto& [task, z] : alloc_.stopping()) {
    if (z.node == n) return true;
  }
  return false;
}

// Requeues, whole, every gang with a task on node n (all its GPUs when `gpus` is empty, else
// only those GPUs). Tasks get the job's checkpoint signal first, then the grace.
void ClusterState::DrainWork(uint32_t n, const std::vector<uint32_t>& gpus, const std::string& why,
                             Time now, Effects* fx) {
  std::vector<sched::JobId> hit;
  for (sched::JobId id : jobs_.active()) {
    const JobRecord& j = jobs_.at(id);
    bool uses = false;
    for (const auto& t : j.tasks) {
      if (t.node != n || t.phase == TaskRun::Phase::kEnded) continue;
      if (gpus.empty()) uses = true;
      for (const auto& g : j.assignment.GrantsOf(j.assignment.tasks[t.index])) {
        uses = uses || std::find(gpus.begin(), gpus.end(), g.gpu) != gpus.end();
      }
    }
    if (uses) hit.push_back(id);
  }
  for (sched::JobId id : hit) {
    JobRecord& j = jobs_.at(id);
    if (job::IsFinal(j.state)) continue;
    RequeueOrReplace(j, n, why, now, fx);  // with the checkpoint signal first
  }
}

void ClusterState::RequestValidation(uint32_t n, Time now, Effects* fx) {
  NodeRecord& r = nodes_[n];
  if (!r.connected || r.validation_asked) return;
  r.validation_asked = true;
  pb::ControllerMessage m;
  m.mutable_validate()->set_reason("health: validation before work");
  fx->messages.push_back({topology_->nodes()[n].name, std::move(m)});
  fx->Event(now, "health", "node/" + topology_->nodes()[n].name, "validation requested");
}

void ClusterState::EvaluateHealth(Time now, Effects* fx) {
  health_pass_.Begin(now);
  health::Evaluation ev = health_.Evaluate(now);
  for (const auto& t : ev.transitions) {
    fx->Event(now, "health", "node/" + topology_->nodes()[t.node].name,
              t.ToString(topology_->nodes()[t.node].name));
  }
  for (const auto& c : ev.held_back) {
    (void)c;
    fx->Event(now, "health", "cluster", "safety valve: " + c.reason);
  }
  for (uint32_t n : ev.drain_nodes) {
    if (nodes_[n].lost) continue;
    // Why: its strongest open condition, or, for an operator's drain (no condition), the cordon.
    const health::NodeReport report = health_.Report(n);
    std::string why = report.conditions.empty() ? "" : report.conditions.front().reason;
    if (why.empty()) {
      for (const auto& t : ev.transitions) {
        if (t.node == n && t.gpu < 0) why = t.reason;
      }
    }
    if (why.empty()) why = "drained";
    DrainWork(n, {}, "node " + topology_->nodes()[n].name + " draining: " + why, now, fx);
  }
  std::map<uint32_t, std::vector<uint32_t>> gpus_by_node;
  for (uint32_t g : ev.drain_gpus) {
    gpus_by_node[topology_->gpus()[g].node].push_back(g);
    health_pass_.draining_gpus().insert(g);
  }
  for (const auto& [n, gpus] : gpus_by_node) {
    DrainWork(n, gpus,
              "GPU " + std::to_string(topology_->gpus()[gpus[0]].index) + " of " +
                  topology_->nodes()[n].name + " draining",
              now, fx);
  }
  for (uint32_t n : ev.validate_nodes) RequestValidation(n, now, fx);
  for (const auto& report : ev.changed) {
    for (const auto& g : report.gpus) alloc_.usage().SetGpuAvailable(g.gpu, g.available);
    UpdateCondition(report.node);
    PersistHealth(report.node, fx);
  }
  // Draining nodes whose work is off move on to quarantine; nodes still waiting for validation
  // (e.g. not connected when it was first asked) are asked again -- but not one whose latest
  // validation could not run: its agent answers at once, and asking again at once is a hot loop
  // of requests and events. It is asked again when that finding fades (HealthOptions, an hour).
  for (uint32_t n = 0; n < nodes_.size(); ++n) {
    const health::HealthState s = health_.node_state(n);
    if (s == health::HealthState::kDraining && !nodes_[n].lost && !HasWork(n)) {
      (void)health_.Apply({health::OperatorAction::Kind::kWorkDrained, n, -1, now});
      health_pass_.Touch();
    }
    if (s == health::HealthState::kPendingValidation && nodes_[n].connected &&
        !nodes_[n].validation_asked && !ValidationCouldNotRun(health_, n)) {
      RequestValidation(n, now, fx);
    }
  }
  // The same for a draining GPU of a node still in the pool: once nothing holds it (its gangs
  // were requeued and their tasks have ended), it moves on to quarantine.
  for (auto it = health_pass_.draining_gpus().begin(); it != health_pass_.draining_gpus().end();) {
    const uint32_t g = *it;
    const uint32_t n = topology_->gpus()[g].node;
    if (health_.gpu_state(g) != health::HealthState::kDraining) {
      it = health_pass_.draining_gpus().erase(it);
      continue;
    }
    if (!nodes_[n].lost && alloc_.usage().gpu_free_milli(g) == alloc_.usage().gpu_capacity(g)) {
      (void)health_.Apply({health::OperatorAction::Kind::kWorkDrained, n,
                           static_cast<int>(topology_->gpus()[g].index), now});
      health_pass_.Touch();
    }
    ++it;
  }
}

void ClusterState::PersistHealth(uint32_t n, Effects* fx) const { PersistNode(n, fx); }

std::vector<ClusterState::GpuSeries> ClusterState::GpuMetrics() const {
  // Who holds each GPU (by global index), so a dashboard can attribute its utilisation.
  struct Holder {
    std::string job, queue, user;
  };
  std::unordered_map<uint32_t, Holder> held;
  auto add = [](std::string& list, const std::string& v) {
    if (list.empty())
      list = v;
    else if (("," + list + ",").find("," + v + ",") == std::string::npos)
      list += "," + v;
  };
  for (sched::JobId id : jobs_.active()) {
    const JobRecord& j = jobs_.at(id);
    for (const auto& g : j.assignment.grants) {
      Holder& h = held[g.gpu];
      add(h.job, std::to_string(j.id));
      add(h.queue, j.spec->spec.queue);
      add(h.user, j.spec->spec.user);
    }
  }
  std::vector<GpuSeries> out;
  for (uint32_t n = 0; n < nodes_.size(); ++n) {
    if (!nodes_[n].connected) continue;
    const auto& info = topology_->nodes()[n];
    for (uint32_t i = 0; i < nodes_[n].gpus.size(); ++i) {
      GpuSeries s{info.name, info.num_gpus ? topology_->models()[info.model] : "", i,
                  nodes_[n].gpus[i]};
      const uint32_t g = info.first_gpu + i;
      // Its node's state counts too: an Xid 79 quarantines the whole node, not one GPU.
      s.health =
          std::string(health::StateName(std::max(health_.gpu_state(g), health_.node_state(n))));
      if (auto it = held.find(g); it != held.end()) {
        s.job = it->second.job;
        s.queue = it->second.queue;
        s.user = it->second.user;
      }
      out.push_back(std::move(s));
    }
  }
  return out;
}

std::vector<std::pair<std::string, std::string>> ClusterState::NodeStates() const {
  std::vector<std::pair<std::string, std::string>> out;
  out.reserve(nodes_.size());
  for (uint32_t n = 0; n < nodes_.size(); ++n)
    out.emplace_back(topology_->nodes()[n].name, NodeState(n));
  return out;
}

}  // namespace hangar::controller
