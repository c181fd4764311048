#include "agent/gpu/nvml_mig.h"

#include <algorithm>

#include "agent/gpu/mig_profiles.h"

namespace hangar::agent {

namespace {

// The compute instance profile of `slices` compute slices (the default one over a whole GPU
// instance), or -1.
int ComputeProfileFor(unsigned slices) {
  switch (slices) {
    case 1:
      return static_cast<int>(nvml::kComputeInstanceProfile1Slice);
    case 2:
      return static_cast<int>(nvml::kComputeInstanceProfile2Slice);
    case 3:
      return static_cast<int>(nvml::kComputeInstanceProfile3Slice);
    case 4:
      return static_cast<int>(nvml::kComputeInstanceProfile4Slice);
    case 7:
      return static_cast<int>(nvml::kComputeInstanceProfile7Slice);
    default:
      return -1;
  }
}

std::string At(const pb::MigGpuInstance& mi) {
  return mi.profile() + " at slice " + std::to_string(mi.start());
}

}  // namespace

Status NvmlMig::Failed(uint32_t gpu, const std::string& call, nvmlReturn_t r) const {
  return Status::FailedPrecondition("GPU " + std::to_string(gpu) + ": " + call +
                                    " failed: " + lib_.ErrorText(r));
}

Status NvmlMig::HaveCalls() const {
  const NvmlFunctions& fn = f();
  if (!fn.device_get_gpu_instance_profile_info || !fn.device_get_gpu_instances ||
      !fn.gpu_instance_get_info || !fn.gpu_instance_get_compute_instance_profile_info ||
      !fn.gpu_instance_get_compute_instances || !fn.compute_instance_get_info ||
      !fn.device_create_gpu_instance_with_placement || !fn.gpu_instance_create_compute_instance ||
      !fn.compute_instance_destroy || !fn.gpu_instance_destroy ||
      !fn.device_get_max_mig_device_count || !fn.device_get_mig_device_handle_by_index ||
      !fn.device_get_gpu_instance_id || !fn.device_get_compute_instance_id || !fn.device_get_uuid) {
    return Status::FailedPrecondition(
        lib_.path() +
        " lacks NVML's MIG instance calls (driver 470 or newer has them): "
        "this agent cannot read or change MIG instances; update the driver");
  }
  return Status::Ok();
}

StatusOr<std::vector<NvmlMig::Profile>> NvmlMig::Profiles(nvmlDevice_t dev, uint32_t gpu) const {
  std::vector<Profile> out;
  for (unsigned index : MigProfileIndices()) {
    nvmlGpuInstanceProfileInfo_t info{};
    const nvmlReturn_t r = f().device_get_gpu_instance_profile_info(dev, index, &info);
    if (r == nvml::kErrorNotSupported) continue;  // not on this part
    if (r != nvml::kSuccess) {
      return Failed(
          gpu, "nvmlDeviceGetGpuInstanceProfileInfo(profile " + std::to_string(index) + ")", r);
    }
    out.push_back({index, info.id, info.sliceCount, info.instanceCount});
  }
  return out;
}

Status NvmlMig::AddComputeInstances(uint32_t gpu, Gi* gi) const {
  for (unsigned p = 0; p < nvml::kComputeInstanceProfileCount; ++p) {
    nvmlComputeInstanceProfileInfo_t info{};
    nvmlReturn_t r = f().gpu_instance_get_compute_instance_profile_info(
        gi->handle, p, nvml::kComputeInstanceEngineProfileShared, &info);
    if (r == nvml::kErrorNotSupported || r == nvml::kErrorInvalidArgument) continue;
    if (r != nvml::kSuccess) return Failed(gpu, "nvmlGpuInstanceGetComputeInstanceProfileInfo", r);
    nvmlComputeInstance_t cis[nvml::kMigMaxInstances] = {};
    unsigned count = 0;
    r = f().gpu_instance_get_compute_instances(gi->handle, info.id, cis, &count);
    if (r != nvml::kSuccess) return Failed(gpu, "nvmlGpuInstanceGetComputeInstances", r);
    for (unsigned i = 0; i < count && i < nvml::kMigMaxInstances; ++i) {
      nvmlComputeInstanceInfo_t ci{};
      r = f().compute_instance_get_info(cis[i], &ci);
      if (r != nvml::kSuccess) return Failed(gpu, "nvmlComputeInstanceGetInfo", r);
      gi->cis.push_back({cis[i], ci.id, info.sliceCount});
    }
  }
  return Status::Ok();
}

StatusOr<std::vector<NvmlMig::Gi>> NvmlMig::Instances(nvmlDevice_t dev, uint32_t gpu,
                                                      const std::vector<Profile>& profiles) const {
  std::vector<Gi> out;
  for (const Profile& p : profiles) {
    nvmlGpuInstance_t gis[nvml::kMigMaxInstances] = {};
    unsigned count = 0;
    nvmlReturn_t r = f().device_get_gpu_instances(dev, p.id, gis, &count);
    if (r != nvml::kSuccess) {
      return Failed(gpu, "nvmlDeviceGetGpuInstances(profile id " + std::to_string(p.id) + ")", r);
    }
    for (unsigned i = 0; i < count && i < nvml::kMigMaxInstances; ++i) {
      nvmlGpuInstanceInfo_t info{};
      r = f().gpu_instance_get_info(gis[i], &info);
      if (r != nvml::kSuccess) return Failed(gpu, "nvmlGpuInstanceGetInfo", r);
      Gi gi;
      gi.handle = gis[i];
      gi.id = info.id;
      gi.profile_index = p.index;
      gi.slices = p.slices;
      gi.placement = info.placement;
      HANGAR_RETURN_IF_ERROR(AddComputeInstances(gpu, &gi));
      out.push_back(std::move(gi));
    }
  }
  std::sort(out.begin(), out.end(),
            [](const Gi& a, const Gi& b) { return a.placement.start < b.placement.start; });
  return out;
}

StatusOr<std::vector<std::pair<std::pair<unsigned, unsigned>, std::string>>> NvmlMig::MigUuids(
    nvmlDevice_t dev, uint32_t gpu) const {
  std::vector<std::pair<std::pair<unsigned, unsigned>, std::string>> out;
  unsigned max = 0;
  nvmlReturn_t r = f().device_get_max_mig_device_count(dev, &max);
  if (r != nvml::kSuccess) return Failed(gpu, "nvmlDeviceGetMaxMigDeviceCount", r);
  for (unsigned i = 0; i < max; ++i) {
    nvmlDevice_t mig = nullptr;
    r = f().device_get_mig_device_handle_by_index(dev, i, &mig);
    if (r == nvml::kErrorNotFound) continue;  // no MIG device at this index
    if (r != nvml::kSuccess)
      return Failed(gpu, "nvmlDeviceGetMigDeviceHandleByIndex(" + std::to_string(i) + ")", r);
    unsigned gi = 0, ci = 0;
    char uuid[nvml::kUuidBufferSize] = {0};
    if ((r = f().device_get_gpu_instance_id(mig, &gi)) != nvml::kSuccess)
      return Failed(gpu, "nvmlDeviceGetGpuInstanceId", r);
    if ((r = f().device_get_compute_instance_id(mig, &ci)) != nvml::kSuccess) {
      return Failed(gpu, "nvmlDeviceGetComputeInstanceId", r);
    }
    if ((r = f().device_get_uuid(mig, uuid, sizeof uuid)) != nvml::kSuccess)
      return Failed(gpu, "nvmlDeviceGetUUID (MIG device)", r);
    out.push_back({{gi, ci}, uuid});
  }
  return out;
}

StatusOr<MigLayout> NvmlMig::Read(nvmlDevice_t dev, uint32_t gpu, int64_t memory_mib) const {
  HANGAR_RETURN_IF_ERROR(HaveCalls());
  HANGAR_ASSIGN_OR_RETURN(auto profiles, Profiles(dev, gpu));
  HANGAR_ASSIGN_OR_RETURN(auto gis, Instances(dev, gpu, profiles));
  HANGAR_ASSIGN_OR_RETURN(auto uuids, MigUuids(dev, gpu));
  MigLayout out;
  for (const Gi& gi : gis) {
    pb::MigGpuInstance mi;
    mi.set_start(gi.placement.start);
    mi.set_memory_slices(gi.placement.size);
    mi.set_compute_slices(gi.slices);
    mi.set_nvml_profile(gi.profile_index);
    mi.set_profile(MigProfileName(memory_mib, gi.slices, gi.placement.size));
    // Usable as one device only with one compute instance over all of it.
    if (gi.cis.size() == 1 && gi.cis[0].slices == gi.slices) {
      for (const auto& [ids, uuid] : uuids) {
        if (ids.first == gi.id && ids.second == gi.cis[0].id) mi.set_uuid(uuid);
      }
    }
    out.push_back(std::move(mi));
  }
  return out;
}

Status NvmlMig::Destroy(nvmlDevice_t, uint32_t gpu, const std::vector<Gi>& gis,
                        const pb::MigGpuInstance& d) const {
  auto gi = std::find_if(gis.begin(), gis.end(), [&](const Gi& g) {
    return g.placement.start == d.start() && g.placement.size == d.memory_slices();
  });
  if (gi == gis.end()) {
    return Status::FailedPrecondition("GPU " + std::to_string(gpu) + ": no GPU instance at slice " +
                                      std::to_string(d.start()) + " to destroy");
  }
  for (const Ci& ci : gi->cis) {
    const nvmlReturn_t r = f().compute_instance_destroy(ci.handle);
    if (r != nvml::kSuccess) {
      return Failed(gpu,
                    "nvmlComputeInstanceDestroy(compute instance " + std::to_string(ci.id) +
                        " of " + At(d) + ")",
                    r);
    }
  }
  const nvmlReturn_t r = f().gpu_instance_destroy(gi->handle);
  if (r != nvml::kSuccess) return Failed(gpu, "nvmlGpuInstanceDestroy(" + At(d) + ")", r);
  return Status::Ok();
}

Status NvmlMig::Create(nvmlDevice_t dev, uint32_t gpu, const std::vector<Profile>& profiles,
                       const pb::MigGpuInstance& c) const {
  auto p = std::find_if(profiles.begin(), profiles.end(),
                        [&](const Profile& x) { return x.index == c.nvml_profile(); });
  const int ci_profile = ComputeProfileFor(c.compute_slices());
  if (p == profiles.end() || ci_profile < 0) {
    return Status::FailedPrecondition("GPU " + std::to_string(gpu) +
                                      " offers no GPU instance profile " +
                                      std::to_string(c.nvml_profile()) + " (" + c.profile() + ")");
  }
  const nvmlGpuInstancePlacement_t placement{c.start(), c.memory_slices()};
  nvmlGpuInstance_t gi = nullptr;
  nvmlReturn_t r = f().device_create_gpu_instance_with_placement(dev, p->id, &placement, &gi);
  if (r != nvml::kSuccess) {
    return Failed(gpu,
                  "nvmlDeviceCreateGpuInstanceWithPlacement(" + At(c) + ", profile id " +
                      std::to_string(p->id) + ")",
                  r);
  }
  nvmlComputeInstanceProfileInfo_t info{};
  r = f().gpu_instance_get_compute_instance_profile_info(
      gi, static_cast<unsigned>(ci_profile), nvml::kComputeInstanceEngineProfileShared, &info);
  if (r != nvml::kSuccess)
    return Failed(gpu, "nvmlGpuInstanceGetComputeInstanceProfileInfo(" + At(c) + ")", r);
  nvmlComputeInstance_t ci = nullptr;
  r = f().gpu_instance_create_compute_instance(gi, info.id, &ci);
  if (r != nvml::kSuccess)
    return Failed(gpu, "nvmlGpuInstanceCreateComputeInstance(" + At(c) + ")", r);
  return Status::Ok();
}

MigReshapeResult NvmlMig::Reshape(nvmlDevice_t dev, uint32_t gpu, int64_t memory_mib,
                                  const MigLayout& destroy, const MigLayout& create) const {
  MigReshapeResult out;
  out.status = [&]() -> Status {
    HANGAR_RETURN_IF_ERROR(HaveCalls());
    HANGAR_ASSIGN_OR_RETURN(auto profiles, Profiles(dev, gpu));
    HANGAR_ASSIGN_OR_RETURN(auto gis, Instances(dev, gpu, profiles));
    for (const auto& d : destroy) HANGAR_RETURN_IF_ERROR(Destroy(dev, gpu, gis, d));
    for (const auto& c : create) HANGAR_RETURN_IF_ERROR(Create(dev, gpu, profiles, c));
    return Status::Ok();
  }();
  // Read back whatever happened, so that no half-done change goes unreported.
  auto layout = Read(dev, gpu, memory_mib);
  if (!layout.ok()) {
    if (out.status.ok())
      out.status = layout.status();
    else
      out.status = Status::FailedPrecondition(
          out.status.message() + "; reading the layout back: " + layout.status().message());
    return out;
  }
  out.layout = *layout;
  if (out.status.ok() && !MigReshapeDone(out.layout, destroy, create)) {
    out.status = Status::FailedPrecondition(
        "GPU " + std::to_string(gpu) + ": after the reshape the driver reports " +
        DescribeMigLayout(out.layout) + ", not what was asked for");
  }
  return out;
}

}  // namespace hangar::agent
