#include "agent/topology_discovery.h"

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "agent/fabric/ib_counters.h"
#include "agent/fabric/nic_affinity.h"
#include "agent/gpu/pci_address.h"
#include "cluster/topology_import.h"

namespace hangar::agent {
namespace {

namespace fs = std::filesystem;

// The first line of a sysfs file, without its newline; "" when it cannot be read.
std::string ReadLine(const fs::path& file) {
  std::ifstream in(file);
  std::string line;
  std::getline(in, line);
  return line;
}

// A port's GUID is the low 64 bits of its GID 0 ("fe80:0000:0000:0000:0002:c903:00a1:000b").
std::string PortGuid(const fs::path& port) {
  const std::string gid = ReadLine(port / "gids" / "0");
  if (gid.size() < 19) return "";
  return cluster::NormalizeGuid(gid.substr(gid.size() - 19));
}

pb::DiscoveredIbPort ReadPort(const std::string& ib_root, const pb::IbPortSample& s) {
  const fs::path dev = fs::path(ib_root) / s.device();
  const fs::path port = dev / "ports" / std::to_string(s.port());
  pb::DiscoveredIbPort p;
  p.set_device(s.device());
  p.set_port(s.port());
  p.set_state(s.state());
  p.set_pci_bus_id(s.pci_bus_id());
  p.set_numa_node(s.numa_node());
  const std::string node_guid = cluster::NormalizeGuid(ReadLine(dev / "node_guid"));
  if (!node_guid.empty()) p.set_node_guid("0x" + node_guid);
  const std::string port_guid = PortGuid(port);
  if (!port_guid.empty()) p.set_port_guid("0x" + port_guid);
  p.set_link_layer(ReadLine(port / "link_layer"));
  p.set_lid(static_cast<uint32_t>(std::strtoul(ReadLine(port / "lid").c_str(), nullptr, 0)));
  return p;
}

// Fills each port's switch from the dump: the switch port line that names its HCA and port.
void FindSwitches(const std::string& dump_file, pb::DiscoveredTopology* out) {
  std::ifstream in(dump_file);
  if (!in) {
    out->add_notes("cannot read the ibnetdiscover dump " + dump_file +
                   ": the InfiniBand switches are not known");
    return;
  }
  std::stringstream text;
  text << in.rdbuf();
  std::map<std::pair<std::string, uint32_t>, cluster::IbHcaLink> by_port;
  for (auto& l : cluster::IbnetdiscoverHcaLinks(text.str()))
    by_port.try_emplace({l.hca_guid, l.hca_port}, l);
  for (pb::DiscoveredIbPort& p : *out->mutable_ib_ports()) {
    if (p.node_guid().empty()) continue;
    auto it = by_port.find({p.node_guid().substr(2), p.port()});
    if (it == by_port.end()) {
      out->add_notes(p.device() + "/" + std::to_string(p.port()) + " (node GUID " + p.node_guid() +
                     ") is not in " + dump_file + ": its switch is not known");
      continue;
    }
    p.set_switch_guid("0x" + it->second.switch_guid);
    p.set_switch_name(it->second.switch_name);
    p.set_switch_port(it->second.switch_port);
  }
}

// Each GPU's NUMA node (sysfs, else the backend's) and the RDMA device nearest to it.
void AddGpus(const TopologyDiscoveryOptions& o, const GpuSystemInfo& gpus,
             const std::vector<pb::DiscoveredGpu>& nvlinks, pb::DiscoveredTopology* out) {
  std::vector<PciEndpoint> gpu_ends, nic_ends;
  for (const pb::DiscoveredIbPort& p : out->ib_ports()) {
    if (!nic_ends.empty() && nic_ends.back().name == p.device()) continue;  // one per device
    auto a = ParsePciAddress(p.pci_bus_id());
    nic_ends.push_back({p.device(), a ? ResolvePciPath(o.pci_root, *a) : "", p.numa_node()});
  }
  for (const pb::GpuInfo& g : gpus.gpus) {
    pb::DiscoveredGpu* d = out->add_gpus();
    for (const auto& n : nvlinks) {
      if (n.index() == g.index()) *d = n;
    }
    d->set_index(g.index());
    d->set_pci_bus_id(g.pci_bus_id());
    auto a = ParsePciAddress(g.pci_bus_id());
    const std::string path = a ? ResolvePciPath(o.pci_root, *a) : "";
    const std::string numa = path.empty() ? "" : ReadLine(fs::path(path) / "numa_node");
    d->set_numa_node(numa.empty() ? g.numa_node() : std::atoi(numa.c_str()));
    gpu_ends.push_back({"GPU " + std::to_string(g.index()), path, d->numa_node()});
  }
  const std::vector<NicChoice> best = BestNicPerGpu(gpu_ends, nic_ends);
  for (int i = 0; i < out->gpus_size() && i < static_cast<int>(best.size()); ++i) {
    const NicChoice& c = best[static_cast<size_t>(i)];
    if (c.nic >= 0)
      out->mutable_gpus(i)->set_nearest_nic(nic_ends[static_cast<size_t>(c.nic)].name);
    out->mutable_gpus(i)->set_nic_affinity(NicAffinityName(c.affinity));
  }
}

}  // namespace

pb::DiscoveredTopology DiscoverTopology(const TopologyDiscoveryOptions& o,
                                        const GpuSystemInfo& gpus,
                                        const std::vector<pb::DiscoveredGpu>& nvlinks) {
  pb::DiscoveredTopology out;
  auto ports = ReadIbPorts(o.ib_root);
  if (!ports.ok()) out.add_notes(ports.status().message());
  if (ports.ok() && ports->empty())
    out.add_notes("no RDMA devices under " + o.ib_root + ": the node's switch is not known");
  for (const auto& s : ports.ok() ? *ports : std::vector<pb::IbPortSample>{})
    *out.add_ib_ports() = ReadPort(o.ib_root, s);
  if (!o.ibnetdiscover.empty()) {
    FindSwitches(o.ibnetdiscover, &out);
  } else if (out.ib_ports_size() > 0) {
    out.add_notes(
        "no ibnetdiscover dump was given (--ibnetdiscover): the InfiniBand switches are not "
        "known");
  }
  AddGpus(o, gpus, nvlinks, &out);
  return out;
}

}  // namespace hangar::agent
