// HealthEngine: observations and operator actions. Evaluation and reports live in
// health_engine_eval.cc.
#include "health/health_engine.h"

#include <algorithm>
#include <utility>

namespace hangar::health {

HealthEngine::HealthEngine(std::shared_ptr<const cluster::Topology> topology, HealthOptions options,
                           Time now)
    : topology_(std::move(topology)),
      options_(std::move(options)),
      valve_(options_.valve, static_cast<int>(topology_->nodes().size())) {
  HealthState initial = options_.subjects.require_validation ? HealthState::kPendingValidation
                                                             : HealthState::kHealthy;
  nodes_.reserve(topology_->nodes().size());
  for (const cluster::NodeInfo& info : topology_->nodes()) {
    // Nodes waiting for validation ask for it at the first evaluation.
    bool validate = initial == HealthState::kPendingValidation;
    NodeRecord& r = nodes_.emplace_back(
        NodeRecord{Subject(initial, now), {}, {}, 0, false, validate, false, {}});
    r.gpus.reserve(info.num_gpus);
    for (uint16_t i = 0; i < info.num_gpus; ++i) {
      r.gpus.push_back(GpuRecord{Subject(HealthState::kHealthy, now),
                                 GpuRules(i, options_.thresholds), XidHistory(), 0});
    }
  }
}

Status HealthEngine::CheckNode(uint32_t node) const {
  if (node < nodes_.size()) return Status::Ok();
  return Status::InvalidArgument("node " + std::to_string(node) + " is not in the cluster (" +
                                 std::to_string(nodes_.size()) + " nodes)");
}

Status HealthEngine::CheckGpu(uint32_t node, int gpu) const {
  HANGAR_RETURN_IF_ERROR(CheckNode(node));
  if (gpu >= -1 && gpu < static_cast<int>(nodes_[node].gpus.size())) return Status::Ok();
  return Status::InvalidArgument(topology_->nodes()[node].name + " has " +
                                 std::to_string(nodes_[node].gpus.size()) +
                                 " GPUs; there is no GPU " + std::to_string(gpu));
}

void HealthEngine::Record(NodeRecord& r, int gpu, const RuleOutput& out, Time t) {
  if (!out.raised.empty() || !out.cleared.empty()) r.settled = false;
  for (const Finding& f : out.raised) {
    Subject& s = SubjectOf(r, f.condition.scope == Scope::kNode ? -1 : gpu);
    bool opened = s.faults().Assert(f, t);
    if (opened && f.condition.action == RecommendedAction::kRunValidation) r.validate = true;
  }
  for (const auto& [scope, key] : out.cleared) {
    SubjectOf(r, scope == Scope::kNode ? -1 : gpu).faults().Resolve(key, t);
  }
}

bool HealthEngine::HasNvlink(uint32_t node) const {
  const cluster::NodeInfo& n = topology_->nodes()[node];
  if (n.num_gpus < 2) return false;
  const auto& gpus = topology_->gpus();
  return gpus[n.first_gpu].nvlink_domain == gpus[n.first_gpu + 1].nvlink_domain;
}

Status HealthEngine::ObserveGpu(uint32_t node, const GpuSample& s) {
  HANGAR_RETURN_IF_ERROR(CheckGpu(node, s.index));
  NodeRecord& r = nodes_[node];
  RuleOutput out;
  r.gpus[s.index].rules.OnSample(s, options_.thresholds, &out);
  Record(r, s.index, out, s.at);
  return Status::Ok();
}

Status HealthEngine::ObserveGpuEvent(uint32_t node, const GpuEvent& e) {
  HANGAR_RETURN_IF_ERROR(CheckGpu(node, e.index));
  NodeRecord& r = nodes_[node];
  r.settled = false;
  GpuRecord& g = r.gpus[e.index];
  RuleOutput out;
  if (e.kind != GpuEvent::Kind::kXid) {
    g.rules.OnEccEvent(e, options_.thresholds, &out);
    Record(r, e.index, out, e.at);
    return Status::Ok();
  }
  XidHistory::Outcome o = g.xids.Apply(e.index, e.code, e.at, options_.thresholds);
  Subject& s = SubjectOf(r, o.finding.condition.scope == Scope::kNode ? -1 : e.index);
  if (o.fatal && o.new_incident) {
    s.RecordFatalXid(e.code, o.reboot_level, e.at, options_.subjects.failure);
  }
  out.Raise(std::move(o.finding));
  Record(r, e.index, out, e.at);
  return Status::Ok();
}

Status HealthEngine::ObserveIbPort(uint32_t node, const IbPortSample& s) {
  HANGAR_RETURN_IF_ERROR(CheckNode(node));
  NodeRecord& r = nodes_[node];
  std::string key = s.device + "/" + std::to_string(s.port);
  auto it = r.ports.find(key);
  if (it == r.ports.end()) it = r.ports.emplace(key, PortRules(s.device, s.port)).first;
  RuleOutput out;
  it->second.OnSample(s, options_.thresholds, &out);
  Record(r, -1, out, s.at);
  return Status::Ok();
}

void HealthEngine::SetExpectedConfig(const std::string& group, ConfigFacts expected) {
  expected_config_[group] = std::move(expected);
}

void HealthEngine::SetBaselines(const std::vector<cluster::ConfigBaseline>& baselines) {
  for (const cluster::ConfigBaseline& b : baselines) {
    SetExpectedConfig(b.group,
                      {b.driver_version, b.cuda_version, b.kernel_version, b.ofed_version});
  }
}

Status HealthEngine::ObserveConfig(uint32_t node, const ConfigFacts& facts, Time t) {
  HANGAR_RETURN_IF_ERROR(CheckNode(node));
  auto it = expected_config_.find(topology_->nodes()[node].group);
  if (it == expected_config_.end()) it = expected_config_.find("");
  std::vector<std::string> drift;
  if (it != expected_config_.end()) drift = ConfigDrift(facts, it->second);
  nodes_[node].settled = false;
  Subject& s = nodes_[node].subject;
  if (drift.empty()) {
    s.faults().Resolve("config_drift", t);
    return Status::Ok();
  }
  Finding f;
  f.key = f.condition.type = "config_drift";
  // A gang across mismatched drivers or OFED risks NCCL hangs; a single-node job is fine.
  f.condition.effect = Effect::kDegrade;
  f.condition.scope = Scope::kNode;
  f.condition.action = RecommendedAction::kFixConfig;
  f.condition.reason = "software differs from the baseline: ";
  for (size_t i = 0; i < drift.size(); ++i) f.condition.reason += (i ? "; " : "") + drift[i];
  s.faults().Assert(f, t);
  return Status::Ok();
}

Status HealthEngine::ObserveStraggler(uint32_t node, const StragglerSignal& s) {
  HANGAR_RETURN_IF_ERROR(CheckNode(node));
  NodeRecord& r = nodes_[node];
  r.settled = false;
  Finding f;
  f.key = f.condition.type = "straggler";
  // Suspect, not drained: a slow rank costs its gang time, not correctness; the job runs on, and
  // new gangs go elsewhere first. Watched rather than validated: the node is busy with the gang.
  f.condition.effect = Effect::kSuspect;
  f.condition.scope = Scope::kNode;
  f.condition.action = RecommendedAction::kWatch;
  f.condition.reason = s.evidence;
  f.clearing = Clearing::kAfterQuiet;
  f.quiet = options_.thresholds.straggler_quiet;
  r.subject.faults().Assert(f, s.at);
  return Status::Ok();
}

Status HealthEngine::ObserveValidation(uint32_t node, const ValidationReport& r) {
  HANGAR_RETURN_IF_ERROR(CheckNode(node));
  for (const GpuBenchmark& b : r.gpus) HANGAR_RETURN_IF_ERROR(CheckGpu(node, b.index));
  NodeRecord& rec = nodes_[node];
  rec.settled = false;
  if (!r.ran) {
    Finding f;
    f.key = f.condition.type = "validation_error";
    f.condition.scope = Scope::kNode;
    f.condition.action = RecommendedAction::kRunValidation;
    f.condition.reason = "validation could not run: " + (r.error.empty() ? "no reason" : r.error);
    f.clearing = Clearing::kAfterQuiet;
    f.quiet = options_.thresholds.info_quiet;
    rec.subject.faults().Assert(f, r.at);
    return Status::Ok();
  }
  rec.subject.faults().Resolve("validation_error", r.at);
  const cluster::NodeInfo& info = topology_->nodes()[node];
  std::string model = r.gpu_model.empty() ? topology_->models()[info.model] : r.gpu_model;
  fleet_.Record(node, model, r);
  ApplyVerdict(rec, JudgeValidation(r, model, HasNvlink(node), fleet_, options_.validation), r.at);
  return Status::Ok();
}

void HealthEngine::ApplyVerdict(NodeRecord& r, const ValidationVerdict& v, Time t) {
  // An outlier (degrade) still lets a subject out of pending validation, as degraded; only a
  // fatal finding (a floor) keeps it out of the pool.
  auto fatal = [](const std::vector<Finding>& findings) {
    return std::any_of(findings.begin(), findings.end(),
                       [](const Finding& f) { return f.condition.effect == Effect::kDrain; });
  };
  for (const GpuVerdict& gv : v.gpus) {
    GpuRecord& g = r.gpus[gv.index];
    g.subject.Validated(t, gv.findings.empty(), fatal(gv.findings));
    for (const Finding& f : gv.findings) g.subject.faults().Assert(f, t);
    g.band = static_cast<int8_t>(gv.band);
  }
  r.subject.Validated(t, v.node_findings.empty(), fatal(v.node_findings));
  for (const Finding& f : v.node_findings) r.subject.faults().Assert(f, t);
  if (v.node_measured) r.band = static_cast<int8_t>(v.node_band);
  r.dirty = true;
}

Status HealthEngine::Apply(const OperatorAction& a) {
  if (a.kind == OperatorAction::Kind::kResetSafetyValve) {
    valve_.Reset();
    return Status::Ok();
  }
  HANGAR_RETURN_IF_ERROR(CheckGpu(a.node, a.gpu));
  NodeRecord& r = nodes_[a.node];
  Subject& s = SubjectOf(r, a.gpu);
  r.dirty = true;
  r.settled = false;
  switch (a.kind) {
    case OperatorAction::Kind::kDrain:
      s.Cordon(a.note.empty() ? "no reason given" : a.note);
      return Status::Ok();
    case OperatorAction::Kind::kUndrain:
      s.Uncordon();
      return Status::Ok();
    case OperatorAction::Kind::kWorkDrained:
      s.WorkDrained(a.at);
      if (a.gpu < 0) {
        for (GpuRecord& g : r.gpus) g.subject.WorkDrained(a.at);
      }
      return Status::Ok();
    case OperatorAction::Kind::kRemediated:
      if ((a.remedy == Remedy::kGpuReset) != (a.gpu >= 0) && a.remedy != Remedy::kRepair) {
        return Status::InvalidArgument(a.remedy == Remedy::kGpuReset
                                           ? "a GPU reset must name the GPU it reset"
                                           : "a node reboot is for the node; do not name a GPU");
      }
      ApplyRemediation(r, a);
      return Status::Ok();
    case OperatorAction::Kind::kNodeLost: {
      r.lost = true;
      Finding f;
      f.key = f.condition.type = "node_lost";
      f.condition.effect = Effect::kDrain;
      f.condition.scope = Scope::kNode;
      f.condition.action = RecommendedAction::kDrainNodeAndReboot;
      f.condition.reason = "heartbeats stopped" + (a.note.empty() ? "" : ": " + a.note);
      f.bypasses_valve = true;  // a fact, not a rule's judgement
      r.subject.faults().Assert(f, a.at);
      return Status::Ok();
    }
    case OperatorAction::Kind::kNodeReturned:
      r.lost = false;
      r.subject.faults().Resolve("node_lost", a.at);
      return Status::Ok();
    case OperatorAction::Kind::kResetSafetyValve:
      break;
  }
  return Status::Ok();
}

void HealthEngine::ApplyRemediation(NodeRecord& r, const OperatorAction& a) {
  Subject& s = SubjectOf(r, a.gpu);
  s.Remediated(a.remedy, a.at, a.note);
  if (a.gpu >= 0) return;
  // A reboot or a repair of the node resets every GPU on it.
  for (GpuRecord& g : r.gpus) g.subject.HardwareReset(a.at);
}

Status HealthEngine::Restore(uint32_t node, int gpu, HealthState s, Time since,
                             const std::string& reason) {
  HANGAR_RETURN_IF_ERROR(CheckGpu(node, gpu));
  NodeRecord& r = nodes_[node];
  Subject& subject = SubjectOf(r, gpu);
  subject.Restore(s, since, reason);
  r.settled = false;
  if (s == HealthState::kDraining || s == HealthState::kQuarantined) {
    Finding f;
    f.key = f.condition.type = "restored";
    f.condition.effect = Effect::kDrain;
    f.condition.scope = gpu < 0 ? Scope::kNode : Scope::kGpu;
    f.condition.gpu = gpu;
    f.condition.action = RecommendedAction::kRunValidation;
    f.condition.reason = std::string("was ") + std::string(StateName(s)) +
                         " before the controller restarted: " + reason;
    f.clearing = Clearing::kOnRemediation;
    subject.faults().Assert(f, since);
  }
  r.dirty = true;
  return Status::Ok();
}

}  // namespace hangar::health
