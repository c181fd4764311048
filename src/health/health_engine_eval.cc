// HealthEngine: evaluation (safety valve, state machines) and reports.
#include <algorithm>

#include "health/health_engine.h"

namespace hangar::health {
namespace {

std::vector<Condition> OpenConditions(const FaultSet& faults) {
  std::vector<Condition> out;
  for (const Fault* f : faults.Open()) out.push_back(f->finding.condition);
  std::stable_sort(out.begin(), out.end(), [](const Condition& a, const Condition& b) {
    if (a.effect != b.effect) return a.effect > b.effect;
    return a.since < b.since;
  });
  return out;
}

}  // namespace

Evaluation HealthEngine::Evaluate(Time now) {
  Evaluation ev;
  ev.at = now;
  for (uint32_t n = 0; n < nodes_.size(); ++n) {
    if (!nodes_[n].settled) EvaluateNode(n, now, &ev);
  }
  ev.safety_valve_tripped = valve_.tripped();
  return ev;
}

// Non-empty (the reason) when a rule would take this node, or a GPU of it, out of the pool and
// the safety valve says no. Nodes already out of the pool cost the fleet nothing more.
std::string HealthEngine::HoldBack(uint32_t node, Time now) {
  NodeRecord& r = nodes_[node];
  if (!IsSchedulable(r.subject.state())) return "";
  bool needs_valve = r.subject.WantsNewDrain() && !r.subject.DrainBypassesValve();
  for (const GpuRecord& g : r.gpus) {
    needs_valve |= g.subject.WantsNewDrain() && !g.subject.DrainBypassesValve();
  }
  if (!needs_valve || valve_.Admit(node, now)) return "";
  return valve_.HeldReason(topology_->nodes()[node].name, now);
}

void HealthEngine::Note(uint32_t node, int gpu, const Subject::Step& step, Time now,
                        Evaluation* ev) {
  Transition t{node, gpu, step.from, step.to, now, step.reason};
  nodes_[node].transitions.push_back(t);
  ev->transitions.push_back(std::move(t));
  if (step.to == HealthState::kPendingValidation) nodes_[node].validate = true;
  // A subject that fails straight from the pool (a reboot-level Xid again after too many reboots)
  // still has work on it: that work is drained as when it goes draining, or it runs on for ever.
  const bool leaves_pool = step.to == HealthState::kDraining ||
                           (step.to == HealthState::kFailed && IsSchedulable(step.from));
  if (!leaves_pool) return;
  if (gpu < 0) {
    ev->drain_nodes.push_back(node);
  } else if (IsSchedulable(nodes_[node].subject.state())) {
    ev->drain_gpus.push_back(topology_->nodes()[node].first_gpu + static_cast<uint32_t>(gpu));
  }
}

void HealthEngine::EvaluateNode(uint32_t node, Time now, Evaluation* ev) {
  NodeRecord& r = nodes_[node];
  r.subject.faults().Expire(now);
  for (GpuRecord& g : r.gpus) g.subject.faults().Expire(now);

  std::string held = HoldBack(node, now);
  if (held.empty()) {
    r.subject.faults().Resolve("safety_valve", now);
  } else {
    Finding f;
    f.key = f.condition.type = "safety_valve";
    f.condition.effect = Effect::kDegrade;  // keeps running work, takes no new gangs
    f.condition.scope = Scope::kNode;
    f.condition.action = RecommendedAction::kResetSafetyValve;
    f.condition.reason = held;
    r.subject.faults().Assert(f, now);
    ev->held_back.push_back(r.subject.faults().Find("safety_valve")->finding.condition);
  }

  // A subject may pass through several states at once (a reboot both drains and clears a node);
  // each step is recorded. Four passes cover the longest chain.
  const SubjectPolicy& policy = options_.subjects;
  HealthState node_state = r.subject.state();
  // Nothing runs on a node that is out of the pool and not draining: its GPUs drain at once.
  bool idle = node_state == HealthState::kPendingValidation ||
              node_state == HealthState::kQuarantined || node_state == HealthState::kFailed;
  for (size_t i = 0; i < r.gpus.size(); ++i) {
    for (int pass = 0; pass < 4; ++pass) {
      auto step = r.gpus[i].subject.Advance(now, policy, held);
      if (!step) break;
      Note(node, static_cast<int>(i), *step, now, ev);
      if (idle) r.gpus[i].subject.WorkDrained(now);
    }
  }
  for (int pass = 0; pass < 4; ++pass) {
    auto step = r.subject.Advance(now, policy, held);
    if (!step) break;
    Note(node, -1, *step, now, ev);
    // A lost node's gangs were requeued by the controller when it declared the node lost.
    if (r.lost) r.subject.WorkDrained(now);
  }

  if (r.validate) ev->validate_nodes.push_back(node);
  r.validate = false;
  r.settled = held.empty() && !r.lost && r.subject.AtRest();
  for (const GpuRecord& g : r.gpus) r.settled = r.settled && g.subject.AtRest();
  bool changed = r.dirty || !r.transitions.empty() || r.subject.faults().changed();
  for (const GpuRecord& g : r.gpus) changed |= g.subject.faults().changed();
  if (!changed) return;
  ev->changed.push_back(Report(node));
  ev->changed.back().transitions = std::move(r.transitions);
  r.transitions.clear();
  r.dirty = false;
  r.subject.faults().ClearChanged();
  for (GpuRecord& g : r.gpus) g.subject.faults().ClearChanged();
}

HealthState HealthEngine::gpu_state(uint32_t gpu) const {
  const cluster::GpuInfo& info = topology_->gpus()[gpu];
  return nodes_[info.node].gpus[info.index].subject.state();
}

cluster::NodeCondition HealthEngine::node_condition(uint32_t node) const {
  const NodeRecord& r = nodes_[node];
  cluster::NodeCondition c;
  c.schedulable = IsSchedulable(r.subject.state());
  if (!c.schedulable) {
    c.gangs_allowed = false;
    return c;
  }
  // A suspect or degraded GPU marks the whole node: a gang is as slow as its slowest member.
  HealthState worst = r.subject.state();
  int band = r.band;
  for (const GpuRecord& g : r.gpus) {
    if (!IsSchedulable(g.subject.state())) continue;
    worst = std::max(worst, g.subject.state());
    band = std::max<int>(band, g.band);
  }
  c.gangs_allowed = worst != HealthState::kDegraded;
  c.penalty = worst == HealthState::kSuspect ? 1 : worst == HealthState::kDegraded ? 2 : 0;
  c.band = static_cast<int8_t>(band);
  return c;
}

NodeReport HealthEngine::Report(uint32_t node) const {
  const NodeRecord& r = nodes_[node];
  const cluster::NodeInfo& info = topology_->nodes()[node];
  NodeReport rep;
  rep.node = node;
  rep.name = info.name;
  rep.state = r.subject.state();
  rep.since = r.subject.state_since();
  rep.condition = node_condition(node);
  rep.needs_validation = rep.state == HealthState::kPendingValidation;
  rep.conditions = OpenConditions(r.subject.faults());
  for (size_t i = 0; i < r.gpus.size(); ++i) {
    const GpuRecord& g = r.gpus[i];
    GpuReport gr;
    gr.gpu = info.first_gpu + static_cast<uint32_t>(i);
    gr.index = static_cast<uint16_t>(i);
    gr.state = g.subject.state();
    gr.since = g.subject.state_since();
    gr.available = IsSchedulable(gr.state);
    gr.band = g.band;
    gr.conditions = OpenConditions(g.subject.faults());
    rep.needs_validation |= gr.state == HealthState::kPendingValidation;
    rep.gpus.push_back(std::move(gr));
  }
  return rep;
}

}  // namespace hangar::health
