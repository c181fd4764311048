// Where this node sits, as its hardware tells it (docs/topology-discovery.md), sent to the
// controller with Register: per GPU its NVLink peers and multi-node NVLink fabric (from the GPU
// backend), its NUMA node and nearest RDMA NIC (sysfs), and per InfiniBand port its GUIDs, LID and
// the switch it is cabled to. The kernel does not show a port's neighbour: that comes from an
// `ibnetdiscover` dump, when one is given, by finding this node's HCAs in it.
#pragma once

#include <string>
#include <vector>

#include "agent/gpu/gpu_backend.h"

namespace hangar::agent {

struct TopologyDiscoveryOptions {
  std::string ib_root = "/sys/class/infiniband";
  std::string pci_root = "/sys/bus/pci/devices";
  std::string ibnetdiscover;  // a dump of `ibnetdiscover` covering this node's HCAs; "" none
};

// Never fails: what cannot be read is left out and said in `notes`. `nvlinks` is the backend's
// DiscoverNvlinks() answer (matched to `gpus` by index). Reads files only; call it off the
// heartbeat thread's hot path (once, at start).
pb::DiscoveredTopology DiscoverTopology(const TopologyDiscoveryOptions& options,
                                        const GpuSystemInfo& gpus,
                                        const std::vector<pb::DiscoveredGpu>& nvlinks);

}  // namespace hangar::agent
