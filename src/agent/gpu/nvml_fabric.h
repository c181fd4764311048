// NVLink as NVML reports it, for topology discovery (GpuBackend::DiscoverNvlinks): each GPU's
// active links and what is at their other end (nvmlDeviceGetNvLinkState,
// nvmlDeviceGetNvLinkRemoteDeviceType, nvmlDeviceGetNvLinkRemotePciInfo_v2), and the multi-node
// NVLink fabric it belongs to (nvmlDeviceGetGpuFabricInfoV, else nvmlDeviceGetGpuFabricInfo).
#pragma once

#include <optional>
#include <vector>

#include "agent/gpu/gpu_backend.h"
#include "agent/gpu/nvml_library.h"
#include "agent/gpu/pci_address.h"

namespace hangar::agent {

// One entry per handle, in order (a null handle: a GPU NVML gave none, reported with no links).
// `pci` holds each GPU's address, to name a link's far end among this node's GPUs. A GPU with
// links to NVSwitches reaches every other GPU that has them (one NVSwitch plane per board), as
// the fake backend's "switch" board does; a link whose far end is a GPU makes that GPU a peer.
std::vector<pb::DiscoveredGpu> DiscoverNvmlNvlinks(
    const NvmlLibrary& lib, const std::vector<nvmlDevice_t>& handles,
    const std::vector<std::optional<PciAddress>>& pci);

// "not_supported", "not_started", "in_progress", "completed" (NVML_GPU_FABRIC_STATE_*).
const char* FabricStateName(unsigned char state);

}  // namespace hangar::agent
