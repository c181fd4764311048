#include "agent/gpu/gpu_check.h"

#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>

#include "common/units.h"

namespace hangar::agent {
namespace {

std::string Format(const char* fmt, auto... args) {
  char buf[512];
  std::snprintf(buf, sizeof buf, fmt, args...);
  return buf;
}

std::string Join(const google::protobuf::RepeatedField<uint32_t>& v) {
  std::string s;
  for (uint32_t x : v) s += (s.empty() ? "" : ",") + std::to_string(x);
  return s.empty() ? "-" : s;
}

void PrintInventory(const GpuSystemInfo& info, std::ostream& out) {
  out << Format("%-4s %-28s %-7s %-17s %-5s %-9s %-7s %-15s %s\n", "GPU", "MODEL", "MEMORY",
                "PCI BUS ID", "NUMA", "MIG", "MINOR", "NVLINK PEERS", "UUID");
  for (const pb::GpuInfo& g : info.gpus) {
    out << Format("%-4u %-28s %-7s %-17s %-5d %-9s %-7d %-15s %s\n", g.index(), g.model().c_str(),
                  FormatMemoryMiB(static_cast<int64_t>(g.memory_mib())).c_str(),
                  g.pci_bus_id().c_str(), g.numa_node(),
                  g.mig_mode().empty() ? "-" : g.mig_mode().c_str(), g.minor_number(),
                  Join(g.nvlink_peers()).c_str(), g.uuid().c_str());
  }
  for (const pb::GpuInfo& g : info.gpus) {
    if (g.mig_profiles_size() == 0) continue;
    out << Format("  GPU %-3u MIG profiles (name: start slices / memory slices):", g.index());
    for (const pb::MigProfile& p : g.mig_profiles()) {
      out << " " << p.name() << ": " << Join(p.starts()) << "/" << p.memory_slices();
    }
    out << "\n";
  }
  if (!info.gpus.empty() && info.gpus[0].topology_level_size() > 0) {
    out << "topology (NVML common ancestor: 0 same board .. 50 across CPU sockets)\n";
    for (const pb::GpuInfo& g : info.gpus)
      out << Format("  GPU %-3u %s\n", g.index(), Join(g.topology_level()).c_str());
  }
}

void PrintTelemetry(const std::vector<pb::GpuTelemetry>& sample, std::ostream& out) {
  out << Format("%-4s %-5s %-15s %-6s %-7s %-7s %-18s %-9s %-9s %-8s %-13s %-8s %s\n", "GPU",
                "UTIL", "MEMORY USED", "TEMP", "POWER", "SM MHZ", "PCIE NOW (MAX)", "ECC S/D",
                "REMAP C/U", "RETIRED", "NVLINK DN/ERR", "EVENTS", "STATE");
  for (const pb::GpuTelemetry& t : sample) {
    if (t.lost()) {
      out << Format("%-4u %s\n", t.index(),
                    "lost: the GPU has fallen off the bus (NVML: GPU_IS_LOST)");
      continue;
    }
    const std::string mem = FormatMemoryMiB(static_cast<int64_t>(t.memory_used_mib())) + "/" +
                            FormatMemoryMiB(static_cast<int64_t>(t.memory_total_mib()));
    const std::string pcie = Format("Gen%ux%u (Gen%ux%u)", t.pcie_gen(), t.pcie_width(),
                                    t.pcie_gen_max(), t.pcie_width_max());
    const bool degraded = t.pcie_gen() < t.pcie_gen_max() || t.pcie_width() < t.pcie_width_max() ||
                          t.ecc_dbe_volatile() > 0 || t.remap_failure() || t.nvlink_down() > 0;
    out << Format("%-4u %-5s %-15s %-6s %-7s %-7u %-18s %-9s %-9s %-8u %-13s 0x%-6llx %s\n",
                  t.index(), (std::to_string(t.util_pct()) + "%").c_str(), mem.c_str(),
                  (std::to_string(t.temperature_c()) + "C").c_str(),
                  (std::to_string(t.power_mw() / 1000) + "W").c_str(), t.sm_clock_mhz(),
                  pcie.c_str(),
                  Format("%llu/%llu", (unsigned long long)t.ecc_sbe_volatile(),
                         (unsigned long long)t.ecc_dbe_volatile())
                      .c_str(),
                  Format("%u/%u%s", t.remapped_rows_correctable(), t.remapped_rows_uncorrectable(),
                         t.remap_pending() ? "*" : "")
                      .c_str(),
                  t.retired_pages(),
                  Format("%u/%llu", t.nvlink_down(), (unsigned long long)t.nvlink_errors()).c_str(),
                  (unsigned long long)t.clock_event_reasons(), degraded ? "check" : "ok");
  }
}

}  // namespace

Status RunGpuCheck(GpuBackend& backend, bool validate, Time now, std::ostream& out) {
  HANGAR_ASSIGN_OR_RETURN(GpuSystemInfo info, backend.Discover());
  out << "backend " << backend.name() << ", driver "
      << (info.driver_version.empty() ? "?" : info.driver_version) << ", CUDA "
      << (info.cuda_version.empty() ? "?" : info.cuda_version) << ", " << info.gpus.size()
      << " GPUs\n\n";
  if (info.gpus.empty()) {
    return Status::FailedPrecondition("the " + backend.name() +
                                      " backend found no GPUs on this machine");
  }
  PrintInventory(info, out);
  out << "\n";
  HANGAR_ASSIGN_OR_RETURN(auto sample, backend.Sample(now));
  PrintTelemetry(sample, out);
  for (const pb::GpuEvent& e : backend.PollEvents(now)) {
    out << "event: GPU " << e.index() << " " << e.kind() << " " << e.code() << ": " << e.message()
        << "\n";
  }
  if (!validate) return Status::Ok();
  out << "\nvalidation (this takes a minute)...\n" << std::flush;
  HANGAR_ASSIGN_OR_RETURN(std::string json, backend.Validate());
  auto j = nlohmann::json::parse(json, nullptr, false);
  out << (j.is_discarded() ? json : j.dump(2)) << "\n";
  return Status::Ok();
}

}  // namespace hangar::agent
