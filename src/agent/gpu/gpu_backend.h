// GpuBackend: the seam between the agent and the GPUs. NVML on machines with NVIDIA GPUs
// (nvml_backend.h); the fake backend with scripted faults for tests, demos and laptops
// (fake_backend.h). Discover() once at start, Sample() about once a second, PollEvents() for Xid
// and ECC events, Validate() when the controller asks. Sample, PollEvents, SetBusy and SetIdle
// may be called from different threads; Validate runs on a thread of its own.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/status.h"
#include "common/time.h"
#include "proto/agent.pb.h"

namespace hangar::agent {

namespace pb = ::hangar::agent::v1;

// How a MIG reshape went: OK, or the first step that failed (the NVML call and its error); and
// the GPU's layout as read back afterwards, either way (best effort after a failure).
struct MigReshapeResult {
  Status status;
  std::vector<pb::MigGpuInstance> layout;
};

struct GpuSystemInfo {
  std::string driver_version;
  std::string cuda_version;
  std::vector<pb::GpuInfo> gpus;
};

class GpuBackend {
 public:
  virtual ~GpuBackend() = default;
  virtual std::string name() const = 0;  // "fake", "nvml"
  virtual StatusOr<GpuSystemInfo> Discover() = 0;
  // One telemetry sample per GPU, in index order.
  virtual StatusOr<std::vector<pb::GpuTelemetry>> Sample(Time now) = 0;
  // Events since the last call.
  virtual std::vector<pb::GpuEvent> PollEvents(Time now) = 0;
  // Tells the backend which GPUs tasks hold and where a task may report its utilisation (the
  // fake backend reads it; NVML measures it).
  virtual void SetBusy(uint32_t /*gpu*/, const std::string& /*util_file*/) {}
  virtual void SetIdle(uint32_t /*gpu*/) {}
  // NVLink as the hardware reports it, one entry per GPU in index order (topology discovery,
  // docs/topology-discovery.md): the GPUs of this node each reaches over NVLink, its active links
  // and those whose other end is an NVSwitch, and the multi-node NVLink fabric it belongs to
  // (cluster UUID and clique of NVL72-class systems). Only those fields are filled.
  virtual std::vector<pb::DiscoveredGpu> DiscoverNvlinks() { return {}; }
  // Runs the validation benchmarks (tools/validate/: GEMM, memory and PCIe bandwidth, NCCL) and
  // returns their JSON. Takes up to minutes: never call it on the heartbeat thread.
  virtual StatusOr<std::string> Validate() = 0;
  // Makes a Validate() running on another thread, and any later one, return soon (Aborted): the
  // agent calls it when it shuts down.
  virtual void CancelValidation() {}
  // MIG. Discover() fills GpuInfo::mig_layout of every MIG-mode GPU. MigLayout reads
  // one GPU's instances now; ReshapeMig destroys `destroy` (each one's compute instances, then
  // the GPU instance) and then creates `create` (a GPU instance at that placement and one compute
  // instance over all of it), in order, stopping at the first failure, and reads the layout back.
  // The instances are complete (mig_layout.h CompleteMigInstance); the caller has checked that
  // the plan fits and that no task runs in what it destroys. May block for seconds: never call it
  // on the heartbeat or stream thread.
  virtual StatusOr<std::vector<pb::MigGpuInstance>> MigLayout(uint32_t /*gpu*/) {
    return Status::FailedPrecondition("the " + name() + " GPU backend has no MIG instances");
  }
  virtual MigReshapeResult ReshapeMig(uint32_t /*gpu*/,
                                      const std::vector<pb::MigGpuInstance>& /*destroy*/,
                                      const std::vector<pb::MigGpuInstance>& /*create*/) {
    return {Status::FailedPrecondition("the " + name() + " GPU backend cannot re-cut MIG GPUs"),
            {}};
  }
  // Schedules the faults of a fault script (fault_script.h), `at` counted from `now`. Only the
  // fake backend can break on cue; the others answer FailedPrecondition.
  virtual Status InjectFaultFile(const std::string& /*path*/, Time /*now*/) {
    return Status::FailedPrecondition("the " + name() +
                                      " GPU backend cannot inject faults; run the agent with "
                                      "--gpu-backend fake");
  }
};

}  // namespace hangar::agent
