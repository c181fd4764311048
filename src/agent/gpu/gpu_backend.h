// GpuBackend: the seam between the agent and the GPUs. NVML on machines with NVIDIA GPUs; the
// fake backend (scripted faults) for tests, demos and laptops. Discover() once at start,
// Sample() about once a second, PollEvents() for Xid and ECC events.
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
};

struct FakeGpuOptions {
  int count = 8;
  std::string model = "H100-SXM-80GB";
  int64_t memory_mib = 80 * 1024;
  int numa_nodes = 2;
  std::string faults_file;  // YAML script of faults (see docs/health.md)
};

StatusOr<std::unique_ptr<GpuBackend>> MakeFakeBackend(const FakeGpuOptions& options, const std::string& node);

}  // namespace hangar::agent
