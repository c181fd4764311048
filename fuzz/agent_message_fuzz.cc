// An agent's messages as the controller's state reads them: an AgentMessage from the wire
// (protobuf bytes) handed to the ClusterState handler the agent channel would call, on a state
// where both nodes are registered and run a gang (tasks 1.0.0 on a, 1.0.1 on b) and a MIG node
// is registered too. The first byte says which node's stream it came in on (a, b, mig-1, or one
// that never registered); the rest is the message. Afterwards the state runs a scheduling cycle,
// its health rules and its heartbeat check, so that whatever the message left behind is used.
#include <google/protobuf/stubs/logging.h>

#include <cstddef>
#include <cstdint>
#include <memory>

#include "cluster/cluster_yaml.h"
#include "controller/state/cluster_state.h"
#include "fuzz_util.h"
#include "job/job_spec.h"

namespace {

using namespace hangar;
using namespace hangar::controller;

const std::shared_ptr<const cluster::Topology>& Topology() {
  static const auto topology = [] {
    auto f = cluster::ParseClusterYaml(
        "node_defaults: {gpus: 8, gpu_model: H100-SXM-80GB, gpu_memory: 80Gi, cpu: 64, memory: "
        "512Gi}\n"
        "nodes: [{name: a}, {name: b}, {name: mig-1, gpus: 2, mig: true}]\n",
        "cluster.yaml");
    if (!f.ok()) fuzz::Fail("the fuzz cluster does not parse: " + f.status().message());
    return f->topology;
  }();
  return topology;
}

pb::Register Registration(const std::string& node, int gpus, bool mig) {
  pb::Register r;
  r.mutable_inventory()->set_node(node);
  r.mutable_inventory()->set_address(node == "a"   ? "127.0.0.1"
                                     : node == "b" ? "127.0.0.2"
                                                   : "127.0.0.3");
  for (int i = 0; i < gpus; ++i) {
    pb::GpuInfo* g = r.mutable_inventory()->add_gpus();
    g->set_index(i);
    g->set_model("H100-SXM-80GB");
    g->set_memory_mib(80 * 1024);
    g->set_mig(mig);
  }
  return r;
}

// Both 8-GPU nodes run the gang 1 (2 x 8 GPUs); job 2 waits.
std::unique_ptr<ClusterState> RunningGang() {
  ControllerOptions o;
  o.require_validation = false;
  auto state = std::make_unique<ClusterState>(Topology(), o,
                                              std::move(sched::Scheduler::Create({})).value());
  Effects fx;
  for (const auto& [node, gpus, mig] :
       {std::tuple{"a", 8, false}, {"b", 8, false}, {"mig-1", 2, true}}) {
    if (!state->OnRegister(Registration(node, gpus, mig), 0, &fx).ok())
      fuzz::Fail("a node does not register");
  }
  for (const char* yaml : {"name: gang\ntasks: [{replicas: 2, gpus: 8, command: [train]}]\n",
                           "name: next\ntasks: [{gpus: 4, command: [eval]}]\n"}) {
    auto spec = job::ParseJobSpec(yaml, "job.yaml");
    if (!spec.ok() || !state->Submit(*spec, 1, &fx).ok()) fuzz::Fail("a job is refused");
  }
  state->Schedule(2, &fx);
  for (const auto& [node, task] : {std::pair{"a", "1.0.0"}, {"b", "1.0.1"}}) {
    pb::TaskStatus s;
    s.set_task_id(task);
    s.set_state(pb::TaskStatus::RUNNING);
    if (!state->OnTaskStatus(node, s, 3, &fx).ok()) fuzz::Fail("the gang does not run");
  }
  return state;
}

void Deliver(ClusterState& s, const std::string& node, pb::AgentMessage& m, Time now, Effects* fx) {
  switch (m.body_case()) {
    case pb::AgentMessage::kRegister:
      (void)s.OnRegister(m.register_(), now, fx);
      break;
    case pb::AgentMessage::kHeartbeat:
      (void)s.OnHeartbeat(node, m.heartbeat(), now);
      break;
    case pb::AgentMessage::kTaskStatus:
      (void)s.OnTaskStatus(node, m.task_status(), now, fx);
      break;
    case pb::AgentMessage::kGpuEvent:
      s.OnGpuEvent(node, m.gpu_event(), now);
      break;
    case pb::AgentMessage::kCheckpointDone:
      (void)s.OnCheckpointDone(node, m.checkpoint_done(), now, fx);
      break;
    case pb::AgentMessage::kValidation:
      s.OnValidation(node, m.validation(), now);
      break;
    case pb::AgentMessage::kStageResult:
      s.OnStageResult(node, m.stage_result(), now, fx);
      break;
    case pb::AgentMessage::kImages:
      s.OnImages(node, m.images(), now, fx);
      break;
    case pb::AgentMessage::kMigReshaped:
      s.OnMigReshaped(node, m.mig_reshaped(), now, fx);
      break;
    default:
      break;  // log chunks go to the log follower, not the state
  }
}

}  // namespace

// protobuf logs every string field that is not UTF-8 as it refuses the message; at thousands of
// inputs a second that is all the output there would be.
extern "C" int LLVMFuzzerInitialize(int*, char***) {
  google::protobuf::SetLogHandler(
      [](google::protobuf::LogLevel, const char*, int, const std::string&) {});
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  pb::AgentMessage m;
  if (!m.ParseFromArray(data + 1, static_cast<int>(size - 1))) return 0;
  static const char* const kNodes[] = {"a", "b", "mig-1", "stranger"};
  const std::string node = kNodes[data[0] % 4];
  auto state = RunningGang();
  Effects fx;
  Deliver(*state, node, m, 4, &fx);
  state->EvaluateHealth(5, &fx);
  state->Schedule(6, &fx);
  state->Tick(1000, &fx);
  state->CheckHeartbeats(2000, &fx);
  (void)state->ListJobs("", 100);
  return 0;
}
