// HealthEngine: telemetry -> conditions -> GPU and node health state, for a whole cluster.
//
// How the controller drives it (all on the state owner's thread; the engine is not thread-safe):
//   1. Feed observations as they arrive: ObserveGpu (each heartbeat's GPU telemetry),
//      ObserveGpuEvent (Xid / ECC), ObserveIbPort, ObserveValidation, ObserveConfig (at
//      registration), ObserveStraggler (from progress reports), and Apply(OperatorAction) for
//      drains, undrains, remediations, lost and returned nodes, and "the work is off"
//      (kWorkDrained).
//   2. Call Evaluate(now) once per tick (say, each second) and act on the result:
//        - drain_nodes: signal checkpoints, requeue the node's gangs, then Apply(kWorkDrained)
//          (lost nodes are listed too, but need nothing: the engine knows their work is gone);
//        - drain_gpus: the same for the gangs that hold those GPUs (the rest of the node works);
//          GPUs of a node that is out of the pool are quarantined at once, never listed;
//        - validate_nodes: send Validate to the agent; feed its report to ObserveValidation.
//          A request is listed once; Report(node).needs_validation says who still waits (a node
//          that was not connected when it was asked, say);
//        - changed: for each report, ClusterUsage::SetNodeCondition(node, report.condition) and
//          ClusterUsage::SetGpuAvailable(gpu.gpu, gpu.available) for its GPUs; record each
//          transition as an event (Transition::ToString);
//        - held_back: drains the fleet safety valve refused; show them, page someone.
//   3. Read Report(node) for `hangar node NAME`.
// Every observation carries its own time, so replays and tests need no clock. Nodes start
// pending validation (unless HealthOptions::subjects.require_validation is off); GPUs start
// healthy and are covered by their node's validation.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "cluster/cluster_yaml.h"
#include "cluster/topology.h"
#include "cluster/usage.h"
#include "common/status.h"
#include "common/time.h"
#include "health/condition.h"
#include "health/gpu_rules.h"
#include "health/inputs.h"
#include "health/node_rules.h"
#include "health/safety_valve.h"
#include "health/subject.h"
#include "health/thresholds.h"
#include "health/validation.h"
#include "health/xid.h"

namespace hangar::health {

struct HealthOptions {
  Thresholds thresholds;
  ValidationPolicy validation;
  SafetyValveOptions valve;
  SubjectPolicy subjects;
};

struct GpuReport {
  uint32_t gpu = 0;    // global index in the Topology (for ClusterUsage::SetGpuAvailable)
  uint16_t index = 0;  // ordinal within its node
  HealthState state = HealthState::kHealthy;
  Time since = 0;
  bool available = true;              // may take new work: healthy, suspect or degraded
  int band = 0;                       // from its latest validation
  std::vector<Condition> conditions;  // open, strongest first
};

struct NodeReport {
  uint32_t node = 0;
  std::string name;
  HealthState state = HealthState::kHealthy;  // the node's own state (node-wide findings)
  Time since = 0;
  cluster::NodeCondition condition;   // for ClusterUsage::SetNodeCondition
  bool needs_validation = false;      // the node or one of its GPUs is pending validation
  std::vector<Condition> conditions;  // node-wide, open, strongest first
  std::vector<GpuReport> gpus;
  std::vector<Transition> transitions;  // since the previous Evaluate (empty from Report())
};

struct Evaluation {
  Time at = 0;
  std::vector<NodeReport> changed;       // nodes whose state, conditions or availability changed
  std::vector<Transition> transitions;   // every transition of this evaluation, in order
  std::vector<uint32_t> drain_nodes;     // nodes that entered draining
  std::vector<uint32_t> drain_gpus;      // global GPU indices that entered draining (node in pool)
  std::vector<uint32_t> validate_nodes;  // run validation on these
  std::vector<Condition> held_back;      // node-wide "safety_valve" conditions, one per node
  bool safety_valve_tripped = false;
};

class HealthEngine {
 public:
  HealthEngine(std::shared_ptr<const cluster::Topology> topology, HealthOptions options, Time now);

  // ---- observations: InvalidArgument for a node or GPU not in the Topology ----
  Status ObserveGpu(uint32_t node, const GpuSample& s);
  Status ObserveGpuEvent(uint32_t node, const GpuEvent& e);
  Status ObserveIbPort(uint32_t node, const IbPortSample& s);
  Status ObserveValidation(uint32_t node, const ValidationReport& r);
  Status ObserveConfig(uint32_t node, const ConfigFacts& facts, Time t);
  // A rank of a gang on `node` is a straggler (StragglerSignal): the node is suspect -- still
  // schedulable, ranked last for new gangs; degraded if it opens 3 times in a day.
  Status ObserveStraggler(uint32_t node, const StragglerSignal& s);
  // The expected software for nodes of `group` (NodeInfo::group); "" for every group without its
  // own baseline.
  void SetExpectedConfig(const std::string& group, ConfigFacts expected);
  // The same, from cluster.yaml's `baselines`.
  void SetBaselines(const std::vector<cluster::ConfigBaseline>& baselines);
  // InvalidArgument for a bad node/GPU, a GPU reset naming no GPU, or a reboot naming one.
  Status Apply(const OperatorAction& a);
  // Puts a node (gpu -1) or GPU back in the state it had before a controller restart. Draining
  // and quarantined ones get a latched fault quoting `reason`: they still need a remediation and
  // a validation; failed ones need a repair.
  Status Restore(uint32_t node, int gpu, HealthState s, Time since, const std::string& reason);

  // Expires quiet findings, consults the safety valve, advances every state machine.
  Evaluation Evaluate(Time now);

  // ---- reads ----
  NodeReport Report(uint32_t node) const;
  HealthState node_state(uint32_t node) const { return nodes_[node].subject.state(); }
  // Whether a node-wide fault (not only an operator's cordon) keeps the node out: a quarantine
  // then waits for a remedy, where an operator's drain waits only for undrain.
  bool held_for_fault(uint32_t node) const {
    const Fault* worst = nodes_[node].subject.faults().WorstOpen();
    return worst != nullptr && worst->finding.condition.effect == Effect::kDrain;
  }
  HealthState gpu_state(uint32_t gpu) const;  // global GPU index
  bool gpu_available(uint32_t gpu) const { return IsSchedulable(gpu_state(gpu)); }
  cluster::NodeCondition node_condition(uint32_t node) const;
  const SafetyValve& safety_valve() const { return valve_; }
  const cluster::Topology& topology() const { return *topology_; }

 private:
  struct GpuRecord {
    Subject subject;
    GpuRules rules;
    XidHistory xids;
    int8_t band = 0;
  };
  struct NodeRecord {
    Subject subject;
    std::vector<GpuRecord> gpus;
    std::map<std::string, PortRules> ports;  // "mlx5_0/1"
    int8_t band = 0;                         // from node-wide validation metrics
    bool lost = false;
    bool validate = false;  // a finding asked for validation since the last Evaluate
    bool dirty = false;     // something reported changed outside the fault sets
    // The node and its GPUs were at rest after the last evaluation, and no input has touched
    // them since: Evaluate skips it (most of a 10,240-node fleet, twice a second).
    bool settled = false;
    std::vector<Transition> transitions;
  };

  // health_engine.cc
  Status CheckNode(uint32_t node) const;
  Status CheckGpu(uint32_t node, int gpu) const;
  void Record(NodeRecord& r, int gpu, const RuleOutput& out, Time t);
  Subject& SubjectOf(NodeRecord& r, int gpu) { return gpu < 0 ? r.subject : r.gpus[gpu].subject; }
  bool HasNvlink(uint32_t node) const;
  void ApplyRemediation(NodeRecord& r, const OperatorAction& a);
  void ApplyVerdict(NodeRecord& r, const ValidationVerdict& v, Time t);
  // health_engine_eval.cc
  std::string HoldBack(uint32_t node, Time now);
  void EvaluateNode(uint32_t node, Time now, Evaluation* ev);
  void Note(uint32_t node, int gpu, const Subject::Step& step, Time now, Evaluation* ev);

  std::shared_ptr<const cluster::Topology> topology_;
  HealthOptions options_;
  std::vector<NodeRecord> nodes_;
  FleetResults fleet_;
  SafetyValve valve_;
  std::map<std::string, ConfigFacts> expected_config_;
};

}  // namespace hangar::health
