// MIG instances through NVML: reading a MIG GPU's GPU instances, their compute
// instances and MIG device UUIDs, and re-cutting it -- compute instances destroyed before their
// GPU instance, new GPU instances created at a placement
// (nvmlDeviceCreateGpuInstanceWithPlacement) each with one compute instance over all of it
// (nvmlGpuInstanceCreateComputeInstance, the default profile of its full slice count). Errors
// name the NVML call and NVML's text for its error. Not thread-safe: the backend serialises.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "agent/gpu/gpu_backend.h"
#include "agent/gpu/mig_layout.h"
#include "agent/gpu/nvml_library.h"

namespace hangar::agent {

class NvmlMig {
 public:
  explicit NvmlMig(const NvmlLibrary& lib) : lib_(lib) {}

  // The GPU's instances, by start. FailedPrecondition when this NVML lacks the MIG calls or
  // one fails (naming it).
  StatusOr<MigLayout> Read(nvmlDevice_t dev, uint32_t gpu, int64_t memory_mib) const;
  // Destroys `destroy`, then creates `create` (complete instances), stopping at the first NVML
  // error; then reads the layout back and checks it is what was asked for.
  MigReshapeResult Reshape(nvmlDevice_t dev, uint32_t gpu, int64_t memory_mib,
                           const MigLayout& destroy, const MigLayout& create) const;

 private:
  struct Ci {
    nvmlComputeInstance_t handle = nullptr;
    unsigned id = 0;
    unsigned slices = 0;
  };
  struct Gi {
    nvmlGpuInstance_t handle = nullptr;
    unsigned id = 0;
    unsigned profile_index = 0, slices = 0;
    nvmlGpuInstancePlacement_t placement{};
    std::vector<Ci> cis;
  };
  struct Profile {
    unsigned index = 0, id = 0, slices = 0, instances = 0;
  };

  const NvmlFunctions& f() const { return lib_.fn(); }
  // "GPU 0: nvmlGpuInstanceDestroy(3g.40gb at slice 4) failed: In use by another client (19)"
  Status Failed(uint32_t gpu, const std::string& call, nvmlReturn_t r) const;
  Status HaveCalls() const;
  StatusOr<std::vector<Profile>> Profiles(nvmlDevice_t dev, uint32_t gpu) const;
  StatusOr<std::vector<Gi>> Instances(nvmlDevice_t dev, uint32_t gpu,
                                      const std::vector<Profile>& profiles) const;
  Status AddComputeInstances(uint32_t gpu, Gi* gi) const;
  // MIG device UUIDs, by (GPU instance id, compute instance id).
  StatusOr<std::vector<std::pair<std::pair<unsigned, unsigned>, std::string>>> MigUuids(
      nvmlDevice_t dev, uint32_t gpu) const;
  Status Destroy(nvmlDevice_t dev, uint32_t gpu, const std::vector<Gi>& gis,
                 const pb::MigGpuInstance& d) const;
  Status Create(nvmlDevice_t dev, uint32_t gpu, const std::vector<Profile>& profiles,
                const pb::MigGpuInstance& c) const;

  const NvmlLibrary& lib_;
};

}  // namespace hangar::agent
