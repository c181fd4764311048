// Which NIC each GPU should use (rail alignment): the one under the same PCIe switch, found as
// the longest common prefix of the two devices' paths in the PCI hierarchy
// (/sys/devices/pci0000:3a/0000:3a:00.0/0000:3b:00.0/...), else one on the same NUMA node.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "agent/gpu/pci_address.h"

namespace hangar::agent {

struct PciEndpoint {
  std::string name;      // "GPU 0", "mlx5_0"
  std::string pci_path;  // canonical sysfs path of the PCI function; "" when unknown
  int32_t numa_node = -1;
};

enum class NicAffinity {
  kNone,        // no NIC near this GPU
  kNumaNode,    // a NIC on the same NUMA node, across the CPU's root complex
  kPcieSwitch,  // a NIC below the same PCIe switch or root port: GPUDirect RDMA stays off the CPU
};

struct NicChoice {
  int nic = -1;  // index into the NICs given; -1 with kNone
  NicAffinity affinity = NicAffinity::kNone;
};

// Pure: the best NIC for each GPU, in GPU order. Ties go to the NIC on the GPU's NUMA node, then
// to the first in the list.
std::vector<NicChoice> BestNicPerGpu(const std::vector<PciEndpoint>& gpus,
                                     const std::vector<PciEndpoint>& nics);

// The canonical path of the PCI function `a` under `pci_devices_root` (/sys/bus/pci/devices,
// whose entries link into /sys/devices); "" when it is not there.
std::string ResolvePciPath(const std::string& pci_devices_root, const PciAddress& a);

const char* NicAffinityName(NicAffinity a);  // "none", "numa", "pcie-switch"

}  // namespace hangar::agent
