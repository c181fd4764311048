// NvmlLibrary: libnvidia-ml.so.1 opened with dlopen and its functions bound into a table, the
// versioned symbol first and the v1 one as a fallback. Required functions (init, device count,
// handle by index) must be present; every other slot may be null, which callers treat as "not
// supported". Thread-compatible: the table is immutable after Open.
#pragma once

#include <memory>
#include <string>

#include "agent/gpu/nvml_types.h"
#include "common/status.h"

namespace hangar::agent {

struct NvmlFunctions {
  // Required.
  nvmlReturn_t (*init)() = nullptr;
  nvmlReturn_t (*device_get_count)(unsigned*) = nullptr;
  nvmlReturn_t (*device_get_handle_by_index)(unsigned, nvmlDevice_t*) = nullptr;
  // Optional: system.
  nvmlReturn_t (*shutdown)() = nullptr;
  const char* (*error_string)(nvmlReturn_t) = nullptr;
  nvmlReturn_t (*system_get_driver_version)(char*, unsigned) = nullptr;
  nvmlReturn_t (*system_get_cuda_driver_version)(int*) = nullptr;
  // Optional: identity and topology.
  nvmlReturn_t (*device_get_uuid)(nvmlDevice_t, char*, unsigned) = nullptr;
  nvmlReturn_t (*device_get_name)(nvmlDevice_t, char*, unsigned) = nullptr;
  nvmlReturn_t (*device_get_serial)(nvmlDevice_t, char*, unsigned) = nullptr;
  nvmlReturn_t (*device_get_pci_info)(nvmlDevice_t, nvmlPciInfo_t*) = nullptr;
  nvmlReturn_t (*device_get_minor_number)(nvmlDevice_t, unsigned*) = nullptr;
  nvmlReturn_t (*device_get_numa_node_id)(nvmlDevice_t, unsigned*) = nullptr;
  nvmlReturn_t (*device_get_memory_info)(nvmlDevice_t, nvmlMemory_t*) = nullptr;
  nvmlReturn_t (*device_get_mig_mode)(nvmlDevice_t, unsigned*, unsigned*) = nullptr;
  nvmlReturn_t (*device_get_gpu_instance_profile_info)(nvmlDevice_t, unsigned,
                                                       nvmlGpuInstanceProfileInfo_t*) = nullptr;
  // With a null array: the count. Else fills up to *count placements.
  nvmlReturn_t (*device_get_gpu_instance_possible_placements)(nvmlDevice_t, unsigned,
                                                              nvmlGpuInstancePlacement_t*,
                                                              unsigned*) = nullptr;
  // MIG instances: read, created with a placement, destroyed; and MIG devices.
  nvmlReturn_t (*device_get_gpu_instances)(nvmlDevice_t, unsigned, nvmlGpuInstance_t*,
                                           unsigned*) = nullptr;
  nvmlReturn_t (*gpu_instance_get_info)(nvmlGpuInstance_t, nvmlGpuInstanceInfo_t*) = nullptr;
  nvmlReturn_t (*gpu_instance_get_compute_instance_profile_info)(
      nvmlGpuInstance_t, unsigned, unsigned, nvmlComputeInstanceProfileInfo_t*) = nullptr;
  nvmlReturn_t (*gpu_instance_get_compute_instances)(nvmlGpuInstance_t, unsigned,
                                                     nvmlComputeInstance_t*, unsigned*) = nullptr;
  nvmlReturn_t (*compute_instance_get_info)(nvmlComputeInstance_t,
                                            nvmlComputeInstanceInfo_t*) = nullptr;
  nvmlReturn_t (*device_create_gpu_instance_with_placement)(nvmlDevice_t, unsigned,
                                                            const nvmlGpuInstancePlacement_t*,
                                                            nvmlGpuInstance_t*) = nullptr;
  nvmlReturn_t (*gpu_instance_create_compute_instance)(nvmlGpuInstance_t, unsigned,
                                                       nvmlComputeInstance_t*) = nullptr;
  nvmlReturn_t (*compute_instance_destroy)(nvmlComputeInstance_t) = nullptr;
  nvmlReturn_t (*gpu_instance_destroy)(nvmlGpuInstance_t) = nullptr;
  nvmlReturn_t (*device_get_max_mig_device_count)(nvmlDevice_t, unsigned*) = nullptr;
  nvmlReturn_t (*device_get_mig_device_handle_by_index)(nvmlDevice_t, unsigned,
                                                        nvmlDevice_t*) = nullptr;
  nvmlReturn_t (*device_get_gpu_instance_id)(nvmlDevice_t, unsigned*) = nullptr;
  nvmlReturn_t (*device_get_compute_instance_id)(nvmlDevice_t, unsigned*) = nullptr;
  nvmlReturn_t (*device_get_topology_common_ancestor)(nvmlDevice_t, nvmlDevice_t, int*) = nullptr;
  nvmlReturn_t (*device_get_p2p_status)(nvmlDevice_t, nvmlDevice_t, int, int*) = nullptr;
  // Optional: telemetry.
  nvmlReturn_t (*device_get_utilization_rates)(nvmlDevice_t, nvmlUtilization_t*) = nullptr;
  nvmlReturn_t (*device_get_temperature)(nvmlDevice_t, int, unsigned*) = nullptr;
  nvmlReturn_t (*device_get_power_usage)(nvmlDevice_t, unsigned*) = nullptr;
  nvmlReturn_t (*device_get_total_energy_consumption)(nvmlDevice_t, unsigned long long*) = nullptr;
  nvmlReturn_t (*device_get_clock_info)(nvmlDevice_t, int, unsigned*) = nullptr;
  nvmlReturn_t (*device_get_clocks_event_reasons)(nvmlDevice_t, unsigned long long*) = nullptr;
  nvmlReturn_t (*device_get_curr_pcie_link_generation)(nvmlDevice_t, unsigned*) = nullptr;
  nvmlReturn_t (*device_get_max_pcie_link_generation)(nvmlDevice_t, unsigned*) = nullptr;
  nvmlReturn_t (*device_get_curr_pcie_link_width)(nvmlDevice_t, unsigned*) = nullptr;
  nvmlReturn_t (*device_get_max_pcie_link_width)(nvmlDevice_t, unsigned*) = nullptr;
  nvmlReturn_t (*device_get_pcie_replay_counter)(nvmlDevice_t, unsigned*) = nullptr;
  nvmlReturn_t (*device_get_total_ecc_errors)(nvmlDevice_t, int, int,
                                              unsigned long long*) = nullptr;
  nvmlReturn_t (*device_get_remapped_rows)(nvmlDevice_t, unsigned*, unsigned*, unsigned*,
                                           unsigned*) = nullptr;
  nvmlReturn_t (*device_get_nvlink_state)(nvmlDevice_t, unsigned, int*) = nullptr;
  // The PCI function at the other end of an NVLink (_v2: the current nvmlPciInfo_t; the v1 call
  // fills the older layout, whose domain, bus and device sit at the same places) and its type.
  nvmlReturn_t (*device_get_nvlink_remote_pci_info)(nvmlDevice_t, unsigned,
                                                    nvmlPciInfo_t*) = nullptr;
  nvmlReturn_t (*device_get_nvlink_remote_device_type)(nvmlDevice_t, unsigned, int*) = nullptr;
  // The multi-node NVLink fabric: the versioned call, else the unversioned one.
  nvmlReturn_t (*device_get_gpu_fabric_info_v)(nvmlDevice_t, nvmlGpuFabricInfoV_t*) = nullptr;
  nvmlReturn_t (*device_get_gpu_fabric_info)(nvmlDevice_t, nvmlGpuFabricInfo_t*) = nullptr;
  nvmlReturn_t (*device_get_nvlink_error_counter)(nvmlDevice_t, unsigned, int,
                                                  unsigned long long*) = nullptr;
  nvmlReturn_t (*device_get_violation_status)(nvmlDevice_t, int, nvmlViolationTime_t*) = nullptr;
  // Retired pages: one of the two is bound (v2 also returns timestamps, which we do not read).
  nvmlReturn_t (*device_get_retired_pages_v2)(nvmlDevice_t, int, unsigned*, unsigned long long*,
                                              unsigned long long*) = nullptr;
  nvmlReturn_t (*device_get_retired_pages_v1)(nvmlDevice_t, int, unsigned*,
                                              unsigned long long*) = nullptr;
  // Optional: events.
  nvmlReturn_t (*event_set_create)(nvmlEventSet_t*) = nullptr;
  nvmlReturn_t (*event_set_free)(nvmlEventSet_t) = nullptr;
  nvmlReturn_t (*device_get_supported_event_types)(nvmlDevice_t, unsigned long long*) = nullptr;
  nvmlReturn_t (*device_register_events)(nvmlDevice_t, unsigned long long,
                                         nvmlEventSet_t) = nullptr;
  nvmlReturn_t (*event_set_wait)(nvmlEventSet_t, nvmlEventData_t*, unsigned) = nullptr;
};

class NvmlLibrary {
 public:
  // dlopen()s `path` (a file name searched as the dynamic linker does, or a path). Unavailable
  // when the library cannot be loaded; FailedPrecondition naming the symbol when a required
  // function is missing. Does not call nvmlInit.
  static StatusOr<std::unique_ptr<NvmlLibrary>> Open(const std::string& path);
  ~NvmlLibrary();
  NvmlLibrary(const NvmlLibrary&) = delete;
  NvmlLibrary& operator=(const NvmlLibrary&) = delete;

  const NvmlFunctions& fn() const { return fn_; }
  const std::string& path() const { return path_; }
  // True when only the v1 nvmlDeviceGetPciInfo was found: the bus id is then in busIdLegacy.
  bool pci_info_v1() const { return pci_info_v1_; }
  // "Driver Not Loaded (9)": NVML's own text when it has one.
  std::string ErrorText(nvmlReturn_t r) const;

 private:
  NvmlLibrary(void* handle, std::string path) : handle_(handle), path_(std::move(path)) {}
  Status Bind();

  void* handle_;
  std::string path_;
  NvmlFunctions fn_;
  bool pci_info_v1_ = false;
};

}  // namespace hangar::agent
