// The NVML test double's MIG instances: a real table of GPU instances and their compute
// instances per GPU, with the driver's rules -- a placement must be one the profile allows
// (else INVALID_ARGUMENT), may not overlap another instance's memory slices (else
// INSUFFICIENT_RESOURCES), a GPU instance with compute instances is IN_USE -- and every call
// logged with its arguments. Handles encode the GPU and instance ids, so a destroyed instance's
// handle answers INVALID_ARGUMENT.
#include <algorithm>
#include <cstdio>

#include "nvml_double_internal.h"

namespace nvml_double {
namespace {

constexpr uintptr_t kGiBase = 0x300000, kCiBase = 0x400000, kMigBase = 0x800000;
constexpr uintptr_t kGpuStride = 0x1000, kGiStride = 0x10;
constexpr unsigned kCiSlices[nvml::kComputeInstanceProfileCount] = {1, 2, 3, 4, 7, 8, 6, 1};
constexpr unsigned kMaxMigDevices = 7;

template <typename T>
T Encode(uintptr_t base, size_t gpu, unsigned gi, unsigned ci = 0) {
  return reinterpret_cast<T>(base + gpu * kGpuStride + gi * kGiStride + ci);
}

// Decodes a handle of `base`: the GPU, GPU instance and compute instance it names, if they exist.
bool Decode(const void* h, uintptr_t base, size_t* gpu, GpuInstance** gi, ComputeInstance** ci) {
  const uintptr_t v = reinterpret_cast<uintptr_t>(h);
  if (v < base || v >= base + M().gpus.size() * kGpuStride) return false;
  *gpu = (v - base) / kGpuStride;
  const unsigned gi_id = static_cast<unsigned>((v - base) % kGpuStride / kGiStride);
  const unsigned ci_id = static_cast<unsigned>(v % kGiStride);
  auto& gis = M().gpus[*gpu].gis;
  auto g =
      std::find_if(gis.begin(), gis.end(), [&](const GpuInstance& x) { return x.id == gi_id; });
  if (g == gis.end()) return false;
  *gi = &*g;
  if (!ci) return base == kGiBase && ci_id == 0;
  auto c = std::find_if(g->cis.begin(), g->cis.end(),
                        [&](const ComputeInstance& x) { return x.id == ci_id; });
  if (c == g->cis.end()) return false;
  *ci = &*c;
  return true;
}

// The scripted profile with this driver id: [id, slices, instances, memory MB, [starts], size].
const json* ProfileById(Gpu* g, unsigned id, unsigned* index) {
  for (auto& [key, p] : g->v["mig_profiles"].items()) {
    if (p[0].get<unsigned>() == id) {
      *index = static_cast<unsigned>(std::stoul(key));
      return &p;
    }
  }
  return nullptr;
}

std::string NewUuid(size_t gpu) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "MIG-%08zx-0000-4000-8000-%012x", gpu, ++M().mig_serial);
  return buf;
}

unsigned FreeId(const std::vector<unsigned>& used, unsigned first) {
  unsigned id = first;
  while (std::find(used.begin(), used.end(), id) != used.end()) ++id;
  return id;
}

// The driver's checks, then a new GPU instance; *out its handle.
nvmlReturn_t CreateGi(Gpu* g, size_t gpu, unsigned profile_id, unsigned start, unsigned size,
                      GpuInstance** out) {
  if (g->v["mig"].get<unsigned>() == 0) return nvml::kErrorNotSupported;
  unsigned index = 0;
  const json* p = ProfileById(g, profile_id, &index);
  if (!p) return nvml::kErrorInvalidArgument;
  const json& starts = (*p)[4];
  if (size != (*p)[5].get<unsigned>() ||
      std::find(starts.begin(), starts.end(), start) == starts.end()) {
    return nvml::kErrorInvalidArgument;
  }
  unsigned same = 0;
  std::vector<unsigned> ids;
  for (const GpuInstance& x : g->gis) {
    if (start < x.start + x.size && x.start < start + size)
      return nvml::kErrorInsufficientResources;
    same += x.profile_id == profile_id;
    ids.push_back(x.id);
  }
  if (same >= (*p)[2].get<unsigned>()) return nvml::kErrorInsufficientResources;
  GpuInstance gi;
  gi.id = FreeId(ids, 1);
  gi.profile_index = index;
  gi.profile_id = profile_id;
  gi.start = start;
  gi.size = size;
  gi.slices = (*p)[1].get<unsigned>();
  g->gis.push_back(gi);
  *out = &g->gis.back();
  (void)gpu;
  return nvml::kSuccess;
}

nvmlReturn_t CreateCi(GpuInstance* gi, size_t gpu, unsigned profile_id, ComputeInstance** out) {
  if (profile_id >= nvml::kComputeInstanceProfileCount || kCiSlices[profile_id] > gi->slices) {
    return nvml::kErrorInvalidArgument;
  }
  unsigned used = 0;
  std::vector<unsigned> ids;
  for (const ComputeInstance& c : gi->cis) {
    used += c.slices;
    ids.push_back(c.id);
  }
  if (used + kCiSlices[profile_id] > gi->slices) return nvml::kErrorInsufficientResources;
  gi->cis.push_back({FreeId(ids, 0), profile_id, kCiSlices[profile_id], NewUuid(gpu)});
  *out = &gi->cis.back();
  return nvml::kSuccess;
}

[[maybe_unused]] nvmlReturn_t EnterGi(const char* fn, nvmlGpuInstance_t h, size_t* gpu,
                                      GpuInstance** gi) {
  if (nvmlReturn_t r = EnterSystem(fn)) return r;
  if (!Decode(h, kGiBase, gpu, gi, nullptr)) return nvml::kErrorInvalidArgument;
  return GpuFails(&M().gpus[*gpu], fn);
}

[[maybe_unused]] nvmlReturn_t EnterCi(const char* fn, nvmlComputeInstance_t h, size_t* gpu,
                                      GpuInstance** gi, ComputeInstance** ci) {
  if (nvmlReturn_t r = EnterSystem(fn)) return r;
  if (!Decode(h, kCiBase, gpu, gi, ci)) return nvml::kErrorInvalidArgument;
  return GpuFails(&M().gpus[*gpu], fn);
}

[[maybe_unused]] std::string Where(size_t gpu, const GpuInstance& gi) {
  return "gpu=" + std::to_string(gpu) + ", gi=" + std::to_string(gi.id);
}

}  // namespace

void ApplyMig(Gpu& g, size_t index) {
  g.gis.clear();
  if (g.v["mig"].get<unsigned>() == 0) return;
  for (const json& want : g.v.value("mig_instances", json::array())) {
    const json& p = g.v["mig_profiles"][std::to_string(want["profile"].get<unsigned>())];
    GpuInstance* gi = nullptr;
    ComputeInstance* ci = nullptr;
    if (CreateGi(&g, index, p[0].get<unsigned>(), want["start"].get<unsigned>(),
                 p[5].get<unsigned>(), &gi) == nvml::kSuccess) {
      const unsigned slices = gi->slices;
      const unsigned ci_profile = static_cast<unsigned>(
          std::find(std::begin(kCiSlices), std::end(kCiSlices), slices) - std::begin(kCiSlices));
      CreateCi(gi, index, ci_profile, &ci);
    }
  }
}

bool MigDeviceUuid(nvmlDevice_t d, std::string* uuid) {
  size_t gpu = 0;
  GpuInstance* gi = nullptr;
  ComputeInstance* ci = nullptr;
  if (!Decode(d, kMigBase, &gpu, &gi, &ci)) return false;
  *uuid = ci->uuid;
  return true;
}

}  // namespace nvml_double

using namespace nvml_double;

#ifndef NVML_DOUBLE_LEGACY

NVML_EXPORT nvmlReturn_t nvmlDeviceGetGpuInstances(nvmlDevice_t d, unsigned profile_id,
                                                   nvmlGpuInstance_t* out, unsigned* count) {
  DEVICE_CALL(d);
  const size_t gpu = static_cast<size_t>(g - M().gpus.data());
  Annotate("gpu=" + std::to_string(gpu) + ", profileId=" + std::to_string(profile_id));
  unsigned index = 0;
  if (U(g, "mig") == 0) return nvml::kErrorNotSupported;
  if (!out || !count || !ProfileById(g, profile_id, &index)) return nvml::kErrorInvalidArgument;
  unsigned n = 0;
  for (const GpuInstance& gi : g->gis) {
    if (gi.profile_id == profile_id) out[n++] = Encode<nvmlGpuInstance_t>(kGiBase, gpu, gi.id);
  }
  *count = n;
  return nvml::kSuccess;
}

NVML_EXPORT nvmlReturn_t nvmlGpuInstanceGetInfo(nvmlGpuInstance_t h, nvmlGpuInstanceInfo_t* info) {
  std::lock_guard<std::mutex> lock(M().mu);
  size_t gpu = 0;
  GpuInstance* gi = nullptr;
  if (nvmlReturn_t r = EnterGi(__func__, h, &gpu, &gi)) return r;
  Annotate(Where(gpu, *gi));
  info->device = Handle(gpu);
  info->id = gi->id;
  info->profileId = gi->profile_id;
  info->placement = {gi->start, gi->size};
  return nvml::kSuccess;
}

NVML_EXPORT nvmlReturn_t
nvmlGpuInstanceGetComputeInstanceProfileInfo(nvmlGpuInstance_t h, unsigned profile, unsigned engine,
                                             nvmlComputeInstanceProfileInfo_t* info) {
  std::lock_guard<std::mutex> lock(M().mu);
  size_t gpu = 0;
  GpuInstance* gi = nullptr;
  if (nvmlReturn_t r = EnterGi(__func__, h, &gpu, &gi)) return r;
  Annotate(Where(gpu, *gi) + ", profile=" + std::to_string(profile) +
           ", engProfile=" + std::to_string(engine));
  if (profile >= nvml::kComputeInstanceProfileCount ||
      engine != nvml::kComputeInstanceEngineProfileShared) {
    return nvml::kErrorInvalidArgument;
  }
  // H100 has no 8- or 6-slice compute instances, nor the 1-slice revision 1.
  if (profile == 5 || profile == 6 || profile == 7 || kCiSlices[profile] > gi->slices)
    return nvml::kErrorNotSupported;
  *info = {};
  info->id = profile;
  info->sliceCount = kCiSlices[profile];
  info->instanceCount = gi->slices / kCiSlices[profile];
  return nvml::kSuccess;
}

NVML_EXPORT nvmlReturn_t nvmlGpuInstanceGetComputeInstances(nvmlGpuInstance_t h,
                                                            unsigned profile_id,
                                                            nvmlComputeInstance_t* out,
                                                            unsigned* count) {
  std::lock_guard<std::mutex> lock(M().mu);
  size_t gpu = 0;
  GpuInstance* gi = nullptr;
  if (nvmlReturn_t r = EnterGi(__func__, h, &gpu, &gi)) return r;
  Annotate(Where(gpu, *gi) + ", profileId=" + std::to_string(profile_id));
  if (!out || !count || profile_id >= nvml::kComputeInstanceProfileCount)
    return nvml::kErrorInvalidArgument;
  unsigned n = 0;
  for (const ComputeInstance& c : gi->cis) {
    if (c.profile_id == profile_id)
      out[n++] = Encode<nvmlComputeInstance_t>(kCiBase, gpu, gi->id, c.id);
  }
  *count = n;
  return nvml::kSuccess;
}

namespace {
nvmlReturn_t CiInfo(const char* fn, nvmlComputeInstance_t h, nvmlComputeInstanceInfo_t* info,
                    bool v2) {
  std::lock_guard<std::mutex> lock(M().mu);
  size_t gpu = 0;
  GpuInstance* gi = nullptr;
  ComputeInstance* ci = nullptr;
  if (nvmlReturn_t r = EnterCi(fn, h, &gpu, &gi, &ci)) return r;
  Annotate(Where(gpu, *gi) + ", ci=" + std::to_string(ci->id));
  info->device = Handle(gpu);
  info->gpuInstance = Encode<nvmlGpuInstance_t>(kGiBase, gpu, gi->id);
  info->id = ci->id;
  info->profileId = ci->profile_id;
  if (v2) info->placement = {0, ci->slices};
  return nvml::kSuccess;
}
}  // namespace

NVML_EXPORT nvmlReturn_t nvmlComputeInstanceGetInfo(nvmlComputeInstance_t h,
                                                    nvmlComputeInstanceInfo_t* info) {
  return CiInfo(__func__, h, info, false);
}
NVML_EXPORT nvmlReturn_t nvmlComputeInstanceGetInfo_v2(nvmlComputeInstance_t h,
                                                       nvmlComputeInstanceInfo_t* info) {
  return CiInfo(__func__, h, info, true);
}

NVML_EXPORT nvmlReturn_t nvmlDeviceCreateGpuInstanceWithPlacement(
    nvmlDevice_t d, unsigned profile_id, const nvmlGpuInstancePlacement_t* placement,
    nvmlGpuInstance_t* out) {
  DEVICE_CALL(d);
  const size_t gpu = static_cast<size_t>(g - M().gpus.data());
  if (!placement || !out) return nvml::kErrorInvalidArgument;
  Annotate("gpu=" + std::to_string(gpu) + ", profileId=" + std::to_string(profile_id) + ", start=" +
           std::to_string(placement->start) + ", size=" + std::to_string(placement->size));
  GpuInstance* gi = nullptr;
  if (nvmlReturn_t r = CreateGi(g, gpu, profile_id, placement->start, placement->size, &gi))
    return r;
  *out = Encode<nvmlGpuInstance_t>(kGiBase, gpu, gi->id);
  return nvml::kSuccess;
}

NVML_EXPORT nvmlReturn_t nvmlGpuInstanceCreateComputeInstance(nvmlGpuInstance_t h,
                                                              unsigned profile_id,
                                                              nvmlComputeInstance_t* out) {
  std::lock_guard<std::mutex> lock(M().mu);
  size_t gpu = 0;
  GpuInstance* gi = nullptr;
  if (nvmlReturn_t r = EnterGi(__func__, h, &gpu, &gi)) return r;
  Annotate(Where(gpu, *gi) + ", profileId=" + std::to_string(profile_id));
  if (!out) return nvml::kErrorInvalidArgument;
  ComputeInstance* ci = nullptr;
  if (nvmlReturn_t r = CreateCi(gi, gpu, profile_id, &ci)) return r;
  *out = Encode<nvmlComputeInstance_t>(kCiBase, gpu, gi->id, ci->id);
  return nvml::kSuccess;
}

NVML_EXPORT nvmlReturn_t nvmlComputeInstanceDestroy(nvmlComputeInstance_t h) {
  std::lock_guard<std::mutex> lock(M().mu);
  size_t gpu = 0;
  GpuInstance* gi = nullptr;
  ComputeInstance* ci = nullptr;
  if (nvmlReturn_t r = EnterCi(__func__, h, &gpu, &gi, &ci)) return r;
  Annotate(Where(gpu, *gi) + ", ci=" + std::to_string(ci->id));
  gi->cis.erase(gi->cis.begin() + (ci - gi->cis.data()));
  return nvml::kSuccess;
}

NVML_EXPORT nvmlReturn_t nvmlGpuInstanceDestroy(nvmlGpuInstance_t h) {
  std::lock_guard<std::mutex> lock(M().mu);
  size_t gpu = 0;
  GpuInstance* gi = nullptr;
  if (nvmlReturn_t r = EnterGi(__func__, h, &gpu, &gi)) return r;
  Annotate(Where(gpu, *gi));
  if (!gi->cis.empty()) return nvml::kErrorInUse;  // compute instances are still there
  auto& gis = M().gpus[gpu].gis;
  gis.erase(gis.begin() + (gi - gis.data()));
  return nvml::kSuccess;
}

NVML_EXPORT nvmlReturn_t nvmlDeviceGetMaxMigDeviceCount(nvmlDevice_t d, unsigned* count) {
  DEVICE_CALL(d);
  *count = U(g, "mig") ? kMaxMigDevices : 0;
  return nvml::kSuccess;
}

NVML_EXPORT nvmlReturn_t nvmlDeviceGetMigDeviceHandleByIndex(nvmlDevice_t d, unsigned index,
                                                             nvmlDevice_t* out) {
  DEVICE_CALL(d);
  const size_t gpu = static_cast<size_t>(g - M().gpus.data());
  Annotate("gpu=" + std::to_string(gpu) + ", index=" + std::to_string(index));
  if (U(g, "mig") == 0) return nvml::kErrorNotSupported;
  if (index >= kMaxMigDevices) return nvml::kErrorInvalidArgument;
  std::vector<std::pair<const GpuInstance*, const ComputeInstance*>> all;
  for (const GpuInstance& gi : g->gis) {
    for (const ComputeInstance& ci : gi.cis) all.emplace_back(&gi, &ci);
  }
  std::sort(all.begin(), all.end(), [](const auto& a, const auto& b) {
    return a.first->start != b.first->start ? a.first->start < b.first->start
                                            : a.second->id < b.second->id;
  });
  if (index >= all.size()) return nvml::kErrorNotFound;
  *out = Encode<nvmlDevice_t>(kMigBase, gpu, all[index].first->id, all[index].second->id);
  return nvml::kSuccess;
}

namespace {
nvmlReturn_t MigIds(const char* fn, nvmlDevice_t d, unsigned* gi_id, unsigned* ci_id) {
  std::lock_guard<std::mutex> lock(M().mu);
  if (nvmlReturn_t r = EnterSystem(fn)) return r;
  size_t gpu = 0;
  GpuInstance* gi = nullptr;
  ComputeInstance* ci = nullptr;
  if (!Decode(d, kMigBase, &gpu, &gi, &ci)) return nvml::kErrorInvalidArgument;  // not a MIG device
  *gi_id = gi->id;
  *ci_id = ci->id;
  return GpuFails(&M().gpus[gpu], fn);
}
}  // namespace

NVML_EXPORT nvmlReturn_t nvmlDeviceGetGpuInstanceId(nvmlDevice_t d, unsigned* id) {
  unsigned ci = 0;
  return MigIds(__func__, d, id, &ci);
}
NVML_EXPORT nvmlReturn_t nvmlDeviceGetComputeInstanceId(nvmlDevice_t d, unsigned* id) {
  unsigned gi = 0;
  return MigIds(__func__, d, &gi, id);
}

#endif  // NVML_DOUBLE_LEGACY
