#include "agent/node_facts.h"

#include <utility>

#include "agent/fabric/ib_counters.h"
#include "agent/fabric/nic_affinity.h"
#include "agent/gpu/pci_address.h"

namespace hangar::agent {

Status NodeFacts::Discover(GpuBackend* backend, const TopologyDiscoveryOptions& where,
                           std::string cgroup_status) {
  HANGAR_ASSIGN_OR_RETURN(gpus_, backend->Discover());
  HANGAR_ASSIGN_OR_RETURN(nics_, ReadIbPorts(where.ib_root));
  discovered_ = DiscoverTopology(where, gpus_, backend->DiscoverNvlinks());
  cgroup_status_ = std::move(cgroup_status);
  return Status::Ok();
}

const pb::GpuInfo* NodeFacts::GpuWithIndex(uint32_t index) const {
  const pb::GpuInfo* found = nullptr;
  for (const auto& g : gpus_.gpus) {
    if (g.index() == index) found = &g;
  }
  return found;
}

std::string NodeFacts::UuidAt(size_t position) const {
  return position < gpus_.gpus.size() ? gpus_.gpus[position].uuid() : "";
}

void NodeFacts::Describe(pb::Inventory* inv) const {
  for (const auto& g : gpus_.gpus) *inv->add_gpus() = g;
  inv->set_driver_version(gpus_.driver_version);
  inv->set_cuda_version(gpus_.cuda_version);
  for (const auto& n : nics_) *inv->add_nics() = n;
}

std::string NodeFacts::NicsForGpus(const std::string& pci_root) const {
  if (gpus_.gpus.empty() || nics_.empty()) return "";
  std::vector<PciEndpoint> gpus, nics;
  for (const auto& g : gpus_.gpus) {
    auto a = ParsePciAddress(g.pci_bus_id());
    gpus.push_back(
        {"GPU " + std::to_string(g.index()), a ? ResolvePciPath(pci_root, *a) : "", g.numa_node()});
  }
  for (const auto& p : nics_) {
    if (!nics.empty() && nics.back().name == p.device())
      continue;  // one entry per device, not port
    auto a = ParsePciAddress(p.pci_bus_id());
    nics.push_back({p.device(), a ? ResolvePciPath(pci_root, *a) : "", p.numa_node()});
  }
  const auto choice = BestNicPerGpu(gpus, nics);
  std::string line;
  for (size_t i = 0; i < choice.size(); ++i) {
    line += (i ? ", " : "") + gpus[i].name + " -> " +
            (choice[i].nic < 0 ? "none" : nics[static_cast<size_t>(choice[i].nic)].name) + " (" +
            NicAffinityName(choice[i].affinity) + ")";
  }
  return line;
}

}  // namespace hangar::agent
