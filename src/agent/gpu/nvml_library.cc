#include "agent/gpu/nvml_library.h"

#include <dlfcn.h>

#include <initializer_list>

namespace hangar::agent {
namespace {

// Binds the first of `names` the library exports; returns the name bound, or nullptr.
template <typename Fn>
const char* BindFirst(void* handle, Fn& slot, std::initializer_list<const char*> names) {
  for (const char* name : names) {
    if (void* p = dlsym(handle, name)) {
      slot = reinterpret_cast<Fn>(p);
      return name;
    }
  }
  return nullptr;
}

}  // namespace

StatusOr<std::unique_ptr<NvmlLibrary>> NvmlLibrary::Open(const std::string& path) {
  dlerror();
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    const char* why = dlerror();
    return Status::Unavailable("cannot load " + path + " (" + (why ? why : "unknown error") +
                               "): the NVIDIA driver is not installed on this machine");
  }
  std::unique_ptr<NvmlLibrary> lib(new NvmlLibrary(handle, path));
  HANGAR_RETURN_IF_ERROR(lib->Bind());
  return lib;
}

NvmlLibrary::~NvmlLibrary() { dlclose(handle_); }

Status NvmlLibrary::Bind() {
  void* h = handle_;
  auto missing = [&](const char* name) {
    return Status::FailedPrecondition(path_ + " exports neither " + name + "_v2 nor " + name +
                                      ", which the agent needs: this is not a usable NVML; "
                                      "reinstall the NVIDIA driver");
  };
  if (!BindFirst(h, fn_.init, {"nvmlInit_v2", "nvmlInit"})) return missing("nvmlInit");
  if (!BindFirst(h, fn_.device_get_count, {"nvmlDeviceGetCount_v2", "nvmlDeviceGetCount"})) {
    return missing("nvmlDeviceGetCount");
  }
  if (!BindFirst(h, fn_.device_get_handle_by_index,
                 {"nvmlDeviceGetHandleByIndex_v2", "nvmlDeviceGetHandleByIndex"})) {
    return missing("nvmlDeviceGetHandleByIndex");
  }
  BindFirst(h, fn_.shutdown, {"nvmlShutdown"});
  BindFirst(h, fn_.error_string, {"nvmlErrorString"});
  BindFirst(h, fn_.system_get_driver_version, {"nvmlSystemGetDriverVersion"});
  BindFirst(h, fn_.system_get_cuda_driver_version,
            {"nvmlSystemGetCudaDriverVersion_v2", "nvmlSystemGetCudaDriverVersion"});
  BindFirst(h, fn_.device_get_uuid, {"nvmlDeviceGetUUID"});
  BindFirst(h, fn_.device_get_name, {"nvmlDeviceGetName"});
  BindFirst(h, fn_.device_get_serial, {"nvmlDeviceGetSerial"});
  const char* pci =
      BindFirst(h, fn_.device_get_pci_info,
                {"nvmlDeviceGetPciInfo_v3", "nvmlDeviceGetPciInfo_v2", "nvmlDeviceGetPciInfo"});
  pci_info_v1_ = pci && std::string_view(pci) == "nvmlDeviceGetPciInfo";
  BindFirst(h, fn_.device_get_minor_number, {"nvmlDeviceGetMinorNumber"});
  BindFirst(h, fn_.device_get_numa_node_id, {"nvmlDeviceGetNumaNodeId"});
  BindFirst(h, fn_.device_get_memory_info, {"nvmlDeviceGetMemoryInfo"});
  BindFirst(h, fn_.device_get_mig_mode, {"nvmlDeviceGetMigMode"});
  BindFirst(h, fn_.device_get_gpu_instance_profile_info, {"nvmlDeviceGetGpuInstanceProfileInfo"});
  // v1 took a placements array in another form (driver < 470); only v2 is read.
  BindFirst(h, fn_.device_get_gpu_instance_possible_placements,
            {"nvmlDeviceGetGpuInstancePossiblePlacements_v2"});
  BindFirst(h, fn_.device_get_gpu_instances, {"nvmlDeviceGetGpuInstances"});
  BindFirst(h, fn_.gpu_instance_get_info, {"nvmlGpuInstanceGetInfo"});
  BindFirst(h, fn_.gpu_instance_get_compute_instance_profile_info,
            {"nvmlGpuInstanceGetComputeInstanceProfileInfo"});
  BindFirst(h, fn_.gpu_instance_get_compute_instances, {"nvmlGpuInstanceGetComputeInstances"});
  BindFirst(h, fn_.compute_instance_get_info,
            {"nvmlComputeInstanceGetInfo_v2", "nvmlComputeInstanceGetInfo"});
  BindFirst(h, fn_.device_create_gpu_instance_with_placement,
            {"nvmlDeviceCreateGpuInstanceWithPlacement"});
  BindFirst(h, fn_.gpu_instance_create_compute_instance, {"nvmlGpuInstanceCreateComputeInstance"});
  BindFirst(h, fn_.compute_instance_destroy, {"nvmlComputeInstanceDestroy"});
  BindFirst(h, fn_.gpu_instance_destroy, {"nvmlGpuInstanceDestroy"});
  BindFirst(h, fn_.device_get_max_mig_device_count, {"nvmlDeviceGetMaxMigDeviceCount"});
  BindFirst(h, fn_.device_get_mig_device_handle_by_index, {"nvmlDeviceGetMigDeviceHandleByIndex"});
  BindFirst(h, fn_.device_get_gpu_instance_id, {"nvmlDeviceGetGpuInstanceId"});
  BindFirst(h, fn_.device_get_compute_instance_id, {"nvmlDeviceGetComputeInstanceId"});
  BindFirst(h, fn_.device_get_topology_common_ancestor, {"nvmlDeviceGetTopologyCommonAncestor"});
  BindFirst(h, fn_.device_get_p2p_status, {"nvmlDeviceGetP2PStatus"});
  BindFirst(h, fn_.device_get_utilization_rates, {"nvmlDeviceGetUtilizationRates"});
  BindFirst(h, fn_.device_get_temperature, {"nvmlDeviceGetTemperature"});
  BindFirst(h, fn_.device_get_power_usage, {"nvmlDeviceGetPowerUsage"});
  BindFirst(h, fn_.device_get_total_energy_consumption, {"nvmlDeviceGetTotalEnergyConsumption"});
  BindFirst(h, fn_.device_get_clock_info, {"nvmlDeviceGetClockInfo"});
  // Renamed in driver 535; same signature and bits.
  BindFirst(
      h, fn_.device_get_clocks_event_reasons,
      {"nvmlDeviceGetCurrentClocksEventReasons", "nvmlDeviceGetCurrentClocksThrottleReasons"});
  BindFirst(h, fn_.device_get_curr_pcie_link_generation, {"nvmlDeviceGetCurrPcieLinkGeneration"});
  BindFirst(h, fn_.device_get_max_pcie_link_generation, {"nvmlDeviceGetMaxPcieLinkGeneration"});
  BindFirst(h, fn_.device_get_curr_pcie_link_width, {"nvmlDeviceGetCurrPcieLinkWidth"});
  BindFirst(h, fn_.device_get_max_pcie_link_width, {"nvmlDeviceGetMaxPcieLinkWidth"});
  BindFirst(h, fn_.device_get_pcie_replay_counter, {"nvmlDeviceGetPcieReplayCounter"});
  BindFirst(h, fn_.device_get_total_ecc_errors, {"nvmlDeviceGetTotalEccErrors"});
  BindFirst(h, fn_.device_get_remapped_rows, {"nvmlDeviceGetRemappedRows"});
  BindFirst(h, fn_.device_get_nvlink_state, {"nvmlDeviceGetNvLinkState"});
  BindFirst(h, fn_.device_get_nvlink_error_counter, {"nvmlDeviceGetNvLinkErrorCounter"});
  BindFirst(h, fn_.device_get_nvlink_remote_pci_info,
            {"nvmlDeviceGetNvLinkRemotePciInfo_v2", "nvmlDeviceGetNvLinkRemotePciInfo"});
  BindFirst(h, fn_.device_get_nvlink_remote_device_type, {"nvmlDeviceGetNvLinkRemoteDeviceType"});
  BindFirst(h, fn_.device_get_gpu_fabric_info_v, {"nvmlDeviceGetGpuFabricInfoV"});
  BindFirst(h, fn_.device_get_gpu_fabric_info, {"nvmlDeviceGetGpuFabricInfo"});
  BindFirst(h, fn_.device_get_violation_status, {"nvmlDeviceGetViolationStatus"});
  if (!BindFirst(h, fn_.device_get_retired_pages_v2, {"nvmlDeviceGetRetiredPages_v2"})) {
    BindFirst(h, fn_.device_get_retired_pages_v1, {"nvmlDeviceGetRetiredPages"});
  }
  BindFirst(h, fn_.event_set_create, {"nvmlEventSetCreate"});
  BindFirst(h, fn_.event_set_free, {"nvmlEventSetFree"});
  BindFirst(h, fn_.device_get_supported_event_types, {"nvmlDeviceGetSupportedEventTypes"});
  BindFirst(h, fn_.device_register_events, {"nvmlDeviceRegisterEvents"});
  BindFirst(h, fn_.event_set_wait, {"nvmlEventSetWait_v2", "nvmlEventSetWait"});
  return Status::Ok();
}

std::string NvmlLibrary::ErrorText(nvmlReturn_t r) const {
  const char* text = fn_.error_string ? fn_.error_string(r) : nullptr;
  return std::string(text && *text ? text : "NVML error") + " (" + std::to_string(r) + ")";
}

}  // namespace hangar::agent
