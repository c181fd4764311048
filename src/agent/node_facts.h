// What the agent found of its node at Init: the GPUs (the backend's), the RDMA ports, the topology
// around them (topology_discovery.h) and how tasks get their cgroups. Written by Discover, read
// afterwards by every flow; the one change after it is MigInstances::Init taking the GPUs' MIG
// layouts (mutable_gpus), still in Init, before any other thread runs.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "agent/gpu/gpu_backend.h"
#include "agent/topology_discovery.h"
#include "common/status.h"
#include "proto/agent.pb.h"

namespace hangar::agent {

namespace pb = ::hangar::agent::v1;

class NodeFacts {
 public:
  // The GPUs `backend` finds, the ports under `where.ib_root` and the topology `where` shows,
  // with `cgroup_status` (TaskRunner::CgroupStatus). An error when the GPUs or the ports cannot be
  // read; the topology never fails (what it lacks is in its notes).
  Status Discover(GpuBackend* backend, const TopologyDiscoveryOptions& where,
                  std::string cgroup_status);

  // One line for the log: "cgroup v2 under /sys/fs/cgroup/..." or "no cgroup: <why>".
  const std::string& cgroup_status() const { return cgroup_status_; }
  // The GPU whose index is `index`; null when the node has none.
  const pb::GpuInfo* GpuWithIndex(uint32_t index) const;
  // The UUID of the `position`th GPU found; "" past the last.
  std::string UuidAt(size_t position) const;
  // For MigInstances::Init, which takes the MIG layouts out of the GPUs.
  std::vector<pb::GpuInfo>* mutable_gpus() { return &gpus_.gpus; }
  // The hardware part of the inventory: the GPUs as found, the driver and CUDA versions, the
  // ports found.
  void Describe(pb::Inventory* inv) const;
  const pb::DiscoveredTopology& discovered() const { return discovered_; }
  // For the log: the NIC closest to each GPU (resolving PCI addresses under `pci_root`) and how
  // close, as "GPU 0 -> mlx5_0 (pcie-switch), ..."; empty without GPUs or ports.
  std::string NicsForGpus(const std::string& pci_root) const;

 private:
  std::string cgroup_status_;
  GpuSystemInfo gpus_;
  std::vector<pb::IbPortSample> nics_;  // the ports found at Init, for the inventory
  pb::DiscoveredTopology discovered_;   // at Init (topology_discovery.h), sent with Register
};

}  // namespace hangar::agent
