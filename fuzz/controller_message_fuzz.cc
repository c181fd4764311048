// The controller's messages as an agent reads them, without a socket or a process: a
// ControllerMessage from the wire (protobuf bytes) into the agent's checks that read its fields.
// A Launch's MIG instances are checked against the node's reported GPUs and its run_as resolved
// as the agent does (ids, or an account looked up by name); a MigReshape goes through the same
// steps as Agent::ApplyMigReshape against the fake backend's MIG GPUs (complete the instances,
// refuse what does not fit, re-cut, read the layout back), so a reshape the checks pass must
// leave the GPU with that layout.
#include <google/protobuf/stubs/logging.h>

#include <cstddef>
#include <cstdint>
#include <memory>

#include "agent/gpu/fake_backend.h"
#include "agent/gpu/mig_layout.h"
#include "agent/gpu/mig_profiles.h"
#include "agent/runner/task_credentials.h"
#include "fuzz_util.h"

namespace {

using namespace hangar;
using namespace hangar::agent;

void Launch(const std::vector<pb::GpuInfo>& gpus, const pb::Launch& l) {
  (void)CheckMigInstances(gpus, l);
  if (!l.has_run_as()) return;
  const pb::RunAs& a = l.run_as();
  if (a.has_uid()) {
    TaskCredentials who = CredentialsFromIds(
        a.uid(), a.gid(), std::vector<gid_t>(a.groups().begin(), a.groups().end()));
    (void)who.Describe();
    (void)SwitchFrom(0, 0, who);
    (void)SwitchFrom(1000, 1000, who);
  } else if (!a.account().empty() && a.account().size() < 64) {
    (void)ResolveAccount(a.account());
  }
}

void Reshape(GpuBackend* backend, const std::vector<pb::GpuInfo>& gpus, const pb::MigReshape& r) {
  auto gpu = std::find_if(gpus.begin(), gpus.end(),
                          [&](const pb::GpuInfo& g) { return g.index() == r.gpu_index(); });
  if (gpu == gpus.end() || !gpu->mig()) return;
  MigLayout destroy(r.destroy().begin(), r.destroy().end()),
      create(r.create().begin(), r.create().end());
  for (auto& c : create) {
    if (!CompleteMigInstance(static_cast<int64_t>(gpu->memory_mib()), &c).ok()) return;
  }
  auto now = backend->MigLayout(r.gpu_index());
  if (!now.ok()) return;
  (void)DescribeMigLayout(*now);
  if (MigReshapeDone(*now, destroy, create) || !CheckMigReshape(*now, destroy, create).ok()) return;
  MigReshapeResult res = backend->ReshapeMig(r.gpu_index(), destroy, create);
  if (!res.status.ok())
    fuzz::Fail("a reshape the agent's checks pass failed: " + res.status.message());
  if (!MigReshapeDone(res.layout, destroy, create))
    fuzz::Fail("a reshape left another layout than asked");
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
  pb::ControllerMessage m;
  if (!m.ParseFromArray(data, static_cast<int>(size))) return 0;
  static ManualClock clock(0);
  FakeGpuOptions o;
  o.count = 2;
  o.mig = true;
  auto backend = MakeFakeBackend(o, "fuzz-node", &clock);
  if (!backend.ok()) fuzz::Fail("the fake backend does not start: " + backend.status().message());
  auto info = (*backend)->Discover();
  if (!info.ok()) fuzz::Fail("the fake backend discovers nothing: " + info.status().message());
  switch (m.body_case()) {
    case pb::ControllerMessage::kLaunch:
      Launch(info->gpus, m.launch());
      break;
    case pb::ControllerMessage::kMigReshape:
      Reshape(backend->get(), info->gpus, m.mig_reshape());
      break;
    case pb::ControllerMessage::kRegistered:
      for (const auto& id : m.registered().stop_tasks()) (void)id.size();
      break;
    default:
      break;
  }
  (void)m.ShortDebugString();
  return 0;
}
