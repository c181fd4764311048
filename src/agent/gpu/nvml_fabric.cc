#include "agent/gpu/nvml_fabric.h"

#include <algorithm>
#include <cstdio>
#include <set>

namespace hangar::agent {
namespace {

struct Links {
  uint32_t active = 0;
  uint32_t to_switch = 0;
  std::set<uint32_t> gpu_peers;  // indices of this node's GPUs at the far end of a link
};

Links ReadLinks(const NvmlLibrary& lib, nvmlDevice_t dev,
                const std::vector<std::optional<PciAddress>>& pci) {
  const NvmlFunctions& f = lib.fn();
  Links out;
  if (!dev || !f.device_get_nvlink_state) return out;
  for (unsigned link = 0; link < nvml::kNvLinkMaxLinks; ++link) {
    int state = 0;
    if (f.device_get_nvlink_state(dev, link, &state) != nvml::kSuccess) continue;
    if (state != nvml::kFeatureEnabled) continue;
    ++out.active;
    int type = -1;
    if (f.device_get_nvlink_remote_device_type &&
        f.device_get_nvlink_remote_device_type(dev, link, &type) == nvml::kSuccess &&
        type == nvml::kNvLinkDeviceTypeSwitch) {
      ++out.to_switch;
      continue;
    }
    nvmlPciInfo_t remote{};
    if (!f.device_get_nvlink_remote_pci_info ||
        f.device_get_nvlink_remote_pci_info(dev, link, &remote) != nvml::kSuccess) {
      continue;
    }
    if (type != -1 && type != nvml::kNvLinkDeviceTypeGpu) continue;
    for (size_t j = 0; j < pci.size(); ++j) {
      if (pci[j] && pci[j]->domain == remote.domain && pci[j]->bus == remote.bus &&
          pci[j]->device == remote.device) {
        out.gpu_peers.insert(static_cast<uint32_t>(j));
      }
    }
  }
  return out;
}

std::string UuidText(const unsigned char (&u)[16]) {
  if (std::all_of(u, u + 16, [](unsigned char c) { return c == 0; })) return "";
  char buf[40];
  std::snprintf(buf, sizeof buf,
                "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", u[0], u[1],
                u[2], u[3], u[4], u[5], u[6], u[7], u[8], u[9], u[10], u[11], u[12], u[13], u[14],
                u[15]);
  return buf;
}

struct FabricAnswer {
  unsigned char state = nvml::kGpuFabricStateNotSupported;
  nvmlReturn_t status = nvml::kSuccess;
  std::string uuid;
  unsigned clique = 0;
};

template <typename Info>
FabricAnswer AnswerOf(const Info& v) {
  return {v.state, v.status, UuidText(v.clusterUuid), v.cliqueId};
}

FabricAnswer AskFabric(const NvmlFunctions& f, nvmlDevice_t dev) {
  if (dev && f.device_get_gpu_fabric_info_v) {
    nvmlGpuFabricInfoV_t v{};
    v.version = nvml::kGpuFabricInfoV3;
    nvmlReturn_t r = f.device_get_gpu_fabric_info_v(dev, &v);
    if (r == nvml::kErrorArgumentVersionMismatch) {  // a driver that knows v2 only
      v = {};
      v.version = nvml::kGpuFabricInfoV2;
      r = f.device_get_gpu_fabric_info_v(dev, &v);
    }
    return r == nvml::kSuccess ? AnswerOf(v) : FabricAnswer{};
  }
  nvmlGpuFabricInfo_t v{};
  if (dev && f.device_get_gpu_fabric_info &&
      f.device_get_gpu_fabric_info(dev, &v) == nvml::kSuccess)
    return AnswerOf(v);
  return {};
}

void ReadFabric(const NvmlLibrary& lib, nvmlDevice_t dev, pb::DiscoveredGpu* g) {
  const FabricAnswer a = AskFabric(lib.fn(), dev);
  g->set_fabric_state(FabricStateName(a.state));
  // A clique counts once the fabric manager has registered the GPU, without error.
  if (a.state == nvml::kGpuFabricStateCompleted && a.status == nvml::kSuccess && !a.uuid.empty()) {
    g->set_fabric_cluster_uuid(a.uuid);
    g->set_fabric_clique_id(a.clique);
  }
}

}  // namespace

const char* FabricStateName(unsigned char state) {
  switch (state) {
    case nvml::kGpuFabricStateNotStarted:
      return "not_started";
    case nvml::kGpuFabricStateInProgress:
      return "in_progress";
    case nvml::kGpuFabricStateCompleted:
      return "completed";
    default:
      return "not_supported";
  }
}

std::vector<pb::DiscoveredGpu> DiscoverNvmlNvlinks(
    const NvmlLibrary& lib, const std::vector<nvmlDevice_t>& handles,
    const std::vector<std::optional<PciAddress>>& pci) {
  std::vector<Links> links;
  for (nvmlDevice_t dev : handles) links.push_back(ReadLinks(lib, dev, pci));
  std::vector<pb::DiscoveredGpu> out;
  for (size_t i = 0; i < handles.size(); ++i) {
    pb::DiscoveredGpu g;
    g.set_index(static_cast<uint32_t>(i));
    g.set_nvlinks_active(links[i].active);
    g.set_nvlinks_to_switch(links[i].to_switch);
    for (size_t j = 0; j < handles.size(); ++j) {
      const bool switched = links[i].to_switch > 0 && links[j].to_switch > 0;
      if (j != i && (switched || links[i].gpu_peers.count(static_cast<uint32_t>(j))))
        g.add_nvlink_peers(static_cast<uint32_t>(j));
    }
    ReadFabric(lib, handles[i], &g);
    out.push_back(std::move(g));
  }
  return out;
}

}  // namespace hangar::agent
