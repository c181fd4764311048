// The NVML test double's NVLink far ends and GPU fabric (topology discovery). A GPU's fields:
//   "nvlink_remote": "switch" (default: every link to an NVSwitch) | ["gpu:1", "switch", ...]
//                    (per link; links past the list go to an NVSwitch)
//   "fabric": {"uuid": "6f1c0e2a-...", "clique": 3, "state": 3, "status": 0} (default: state 0,
//             NOT_SUPPORTED, as on a GPU outside a multi-node NVLink system)
// The legacy build has none of these calls.
#include <cstdio>
#include <cstring>

#include "nvml_double_internal.h"

#ifndef NVML_DOUBLE_LEGACY
namespace nvml_double {
namespace {

// "switch", "gpu:J", or "" when the link does not exist.
std::string Remote(const Gpu* g, unsigned link) {
  if (link >= U(g, "nvlinks")) return "";
  const json r = g->v.value("nvlink_remote", json("switch"));
  if (r.is_array()) return link < r.size() ? r[link].get<std::string>() : "switch";
  return r.get<std::string>();
}

void FillPci(const std::string& bus_id, nvmlPciInfo_t* p) {
  *p = {};
  std::snprintf(p->busId, sizeof p->busId, "%s", bus_id.c_str());
  std::snprintf(p->busIdLegacy, sizeof p->busIdLegacy, "%s", bus_id.c_str() + 4);
  std::sscanf(bus_id.c_str(), "%x:%x:%x", &p->domain, &p->bus, &p->device);
}

}  // namespace
}  // namespace nvml_double

using namespace nvml_double;  // NOLINT: the exported functions below are C

NVML_EXPORT nvmlReturn_t nvmlDeviceGetNvLinkRemoteDeviceType(nvmlDevice_t d, unsigned link,
                                                             int* type) {
  DEVICE_CALL(d);
  const std::string r = Remote(g, link);
  if (r.empty()) return nvml::kErrorInvalidArgument;
  *type = r == "switch" ? nvml::kNvLinkDeviceTypeSwitch : nvml::kNvLinkDeviceTypeGpu;
  return nvml::kSuccess;
}

NVML_EXPORT nvmlReturn_t nvmlDeviceGetNvLinkRemotePciInfo_v2(nvmlDevice_t d, unsigned link,
                                                             nvmlPciInfo_t* pci) {
  DEVICE_CALL(d);
  const std::string r = Remote(g, link);
  if (r.empty()) return nvml::kErrorInvalidArgument;
  if (r == "switch") {  // one of the board's NVSwitches
    FillPci("00000000:05:00.0", pci);
    return nvml::kSuccess;
  }
  const size_t peer = std::strtoul(r.c_str() + 4, nullptr, 10);
  if (peer >= M().gpus.size()) return nvml::kErrorUnknown;
  FillPci(M().gpus[peer].v["pci"].get<std::string>(), pci);
  return nvml::kSuccess;
}

NVML_EXPORT nvmlReturn_t nvmlDeviceGetGpuFabricInfoV(nvmlDevice_t d, nvmlGpuFabricInfoV_t* info) {
  DEVICE_CALL(d);
  const unsigned version = info->version;
  if (version != nvml::kGpuFabricInfoV2 && version != nvml::kGpuFabricInfoV3)
    return nvml::kErrorArgumentVersionMismatch;
  const json f = g->v.value("fabric", json::object());
  *info = {};
  info->version = version;
  info->state = static_cast<unsigned char>(f.value("state", 0));
  info->status = f.value("status", 0);
  info->cliqueId = f.value("clique", 0u);
  const std::string uuid = f.value("uuid", std::string());
  for (size_t i = 0, b = 0; i + 1 < uuid.size() && b < 16; ++i) {
    if (uuid[i] == '-') continue;
    info->clusterUuid[b++] = static_cast<unsigned char>(std::stoul(uuid.substr(i, 2), nullptr, 16));
    ++i;
  }
  return nvml::kSuccess;
}
#endif  // NVML_DOUBLE_LEGACY
