#include "agent/fabric/nic_affinity.h"

#include <filesystem>
#include <string_view>

namespace hangar::agent {
namespace {

std::vector<std::string_view> Components(std::string_view path) {
  std::vector<std::string_view> out;
  size_t start = 0;
  while (start <= path.size()) {
    size_t slash = path.find('/', start);
    if (slash == std::string_view::npos) slash = path.size();
    if (slash > start) out.push_back(path.substr(start, slash - start));
    start = slash + 1;
  }
  return out;
}

// How many bridges two PCI functions share below their root complex ("pci0000:3a"): 0 when they
// meet only at the root complex (or not at all), 1 or more when a root port or switch is shared.
int SharedBridges(std::string_view a, std::string_view b) {
  const auto ca = Components(a);
  const auto cb = Components(b);
  size_t root = 0;
  while (root < ca.size() && ca[root].substr(0, 3) != "pci") ++root;
  size_t shared = 0;
  while (shared < ca.size() && shared < cb.size() && ca[shared] == cb[shared]) ++shared;
  if (root >= ca.size() || shared <= root + 1) return 0;
  // The last component of each path is the function itself, never a shared bridge.
  const size_t limit = std::min(ca.size(), cb.size()) - 1;
  return static_cast<int>(std::min(shared, limit)) - static_cast<int>(root + 1);
}

}  // namespace

std::vector<NicChoice> BestNicPerGpu(const std::vector<PciEndpoint>& gpus,
                                     const std::vector<PciEndpoint>& nics) {
  std::vector<NicChoice> out;
  for (const PciEndpoint& gpu : gpus) {
    NicChoice best;
    int best_bridges = 0;
    bool best_same_numa = false;
    for (size_t n = 0; n < nics.size(); ++n) {
      const int bridges = gpu.pci_path.empty() || nics[n].pci_path.empty()
                              ? 0
                              : SharedBridges(gpu.pci_path, nics[n].pci_path);
      const bool same_numa = gpu.numa_node >= 0 && gpu.numa_node == nics[n].numa_node;
      const bool better =
          bridges > best_bridges || (bridges == best_bridges && same_numa && !best_same_numa);
      if (!better) continue;
      best.nic = static_cast<int>(n);
      best.affinity = bridges > 0 ? NicAffinity::kPcieSwitch : NicAffinity::kNumaNode;
      best_bridges = bridges;
      best_same_numa = same_numa;
    }
    out.push_back(best);
  }
  return out;
}

std::string ResolvePciPath(const std::string& pci_devices_root, const PciAddress& a) {
  std::error_code ec;
  auto path =
      std::filesystem::canonical(std::filesystem::path(pci_devices_root) / SysfsPciName(a), ec);
  return ec ? "" : path.string();
}

const char* NicAffinityName(NicAffinity a) {
  switch (a) {
    case NicAffinity::kPcieSwitch:
      return "pcie-switch";
    case NicAffinity::kNumaNode:
      return "numa";
    default:
      return "none";
  }
}

}  // namespace hangar::agent
