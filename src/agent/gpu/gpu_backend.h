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
  // Runs the validation benchmarks (tools/validate/: GEMM, memory and PCIe bandwidth, NCCL) and
  // returns their JSON. Takes up to minutes: never call it on the heartbeat thread.
  virtual StatusOr<std::string> Validate() = 0;
  // Makes a Validate() running on another thread, and any later one, return soon (Aborted): the
  // agent calls it when it shuts down.
  virtual void CancelValidation() {}
  // Schedules the faults of a fault script (fault_script.h), `at` counted from `now`. Only the
  // fake backend can break on cue; the others answer FailedPrecondition.
  virtual Status InjectFaultFile(const std::string& /*path*/, Time /*now*/) {
    return Status::FailedPrecondition("the " + name() +
                                      " GPU backend cannot inject faults; run the agent with "
                                      "--gpu-backend fake");
  }
};

}  // namespace hangar::agent
