// The fake GPU backend: GPUs that exist only in memory. A GPU a task holds reports 100%
// utilisation unless the task writes another number (0-100) into its HANGAR_FAKE_GPU_UTIL_FILE;
// an idle GPU reports 0%.
#include <fstream>
#include <map>
#include <mutex>

#include "agent/gpu/gpu_backend.h"

namespace hangar::agent {
namespace {

class FakeBackend final : public GpuBackend {
 public:
  FakeBackend(FakeGpuOptions o, std::string node) : o_(std::move(o)), node_(std::move(node)) {}

  std::string name() const override { return "fake"; }

  StatusOr<GpuSystemInfo> Discover() override {
    GpuSystemInfo info;
    info.driver_version = "fake-570.00";
    info.cuda_version = "13.0";
    for (int i = 0; i < o_.count; ++i) {
      pb::GpuInfo g;
      g.set_index(static_cast<uint32_t>(i));
      g.set_uuid("GPU-fake-" + node_ + "-" + std::to_string(i));
      g.set_model(o_.model);
      g.set_memory_mib(static_cast<uint64_t>(o_.memory_mib));
      char bus[32];
      std::snprintf(bus, sizeof bus, "00000000:%02X:00.0", 0x18 + i * 0x10);
      g.set_pci_bus_id(bus);
      g.set_numa_node(o_.numa_nodes > 0 ? i * o_.numa_nodes / std::max(1, o_.count) : -1);
      info.gpus.push_back(g);
    }
    return info;
  }

  StatusOr<std::vector<pb::GpuTelemetry>> Sample(Time) override {
    std::lock_guard<std::mutex> l(mu_);
    std::vector<pb::GpuTelemetry> out;
    for (int i = 0; i < o_.count; ++i) {
      pb::GpuTelemetry t;
      t.set_index(static_cast<uint32_t>(i));
      uint32_t util = 0;
      auto it = busy_.find(static_cast<uint32_t>(i));
      if (it != busy_.end()) util = ReadUtil(it->second);
      t.set_util_pct(util);
      t.set_memory_total_mib(static_cast<uint64_t>(o_.memory_mib));
      t.set_memory_used_mib(util ? static_cast<uint64_t>(o_.memory_mib) / 2 : 0);
      t.set_temperature_c(35 + util / 3);
      t.set_power_mw(70000 + util * 5000);
      t.set_sm_clock_mhz(util ? 1980 : 345);
      t.set_mem_clock_mhz(2619);
      t.set_pcie_gen(5);
      t.set_pcie_width(16);
      t.set_pcie_gen_max(5);
      t.set_pcie_width_max(16);
      out.push_back(t);
    }
    return out;
  }

  std::vector<pb::GpuEvent> PollEvents(Time) override { return {}; }

  void SetBusy(uint32_t gpu, const std::string& util_file) override {
    std::lock_guard<std::mutex> l(mu_);
    busy_[gpu] = util_file;
  }
  void SetIdle(uint32_t gpu) override {
    std::lock_guard<std::mutex> l(mu_);
    busy_.erase(gpu);
  }

 private:
  static uint32_t ReadUtil(const std::string& file) {
    std::ifstream in(file);
    int v = -1;
    if (in >> v && v >= 0 && v <= 100) return static_cast<uint32_t>(v);
    return 100;
  }

  FakeGpuOptions o_;
  std::string node_;
  std::mutex mu_;
  std::map<uint32_t, std::string> busy_;
};

}  // namespace

StatusOr<std::unique_ptr<GpuBackend>> MakeFakeBackend(const FakeGpuOptions& options, const std::string& node) {
  if (options.count < 0 || options.count > 64) return Status::InvalidArgument("--fake-gpus must be 0 to 64");
  return std::unique_ptr<GpuBackend>(new FakeBackend(options, node));
}

}  // namespace hangar::agent
