// MIG geometry: how NVIDIA's A100, H100 and H200 cut one GPU into instances. A GPU in MIG mode
// has 8 memory slices and 7 compute slices; a GPU instance of a profile takes `memory_slices`
// consecutive memory slices from one of the profile's allowed start slices, and the compute
// slices [start, start + compute_slices). Every allowed placement keeps its compute slices inside
// its memory slices, so two instances conflict exactly when their memory slices overlap -- an
// occupancy is one 8-bit mask of taken memory slices.
//
// The shapes are the same on every part; only the memory names differ (1g.10gb on H100-80GB is
// 1g.18gb on H200-141GB). Profile names come from NVIDIA's MIG user guide; placements are what
// nvmlDeviceGetGpuInstancePossiblePlacements_v2 answers (start and size in memory slices).
// Pure functions over constant tables: safe from any thread.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

namespace hangar::cluster {

inline constexpr int kMigMemorySlices = 8;
inline constexpr int kMigComputeSlices = 7;

// The shape of a GPU instance, common to every MIG part. Ordered smallest first.
enum class MigShape : uint8_t {
  k1g,        // 1 compute, 1 memory slice; starts 0-6
  k1gDouble,  // 1 compute, 2 memory slices; starts 0, 2, 4, 6
  k2g,        // 2 compute, 2 memory; starts 0, 2, 4
  k3g,        // 3 compute, 4 memory; starts 0, 4
  k4g,        // 4 compute, 4 memory; start 0
  k7g,        // 7 compute, 8 memory; start 0
};
inline constexpr int kMigShapes = 6;
inline constexpr uint8_t kNoMigShape = 0xff;  // "this part has no such profile"

struct MigShapeInfo {
  int compute_slices;
  int memory_slices;
  uint8_t starts;  // bit s set: may start at memory slice s
  // NVML's GPU instance profile index (NVML_GPU_INSTANCE_PROFILE_*) for this shape.
  unsigned nvml_profile;
};
const MigShapeInfo& ShapeInfo(MigShape shape);

// The memory slices a shape takes when it starts at `start`: a mask, or 0 when `start` is not
// one of the shape's allowed starts. A table (the placer asks this in its inner loops);
// mig_geometry_test checks it against ShapeInfo.
inline constexpr uint8_t kMigPlacementMasks[kMigShapes][kMigMemorySlices] = {
    {0x01, 0x02, 0x04, 0x08, 0x10, 0x20, 0x40, 0},  // 1g
    {0x03, 0, 0x0c, 0, 0x30, 0, 0xc0, 0},           // 1g, double memory
    {0x03, 0, 0x0c, 0, 0x30, 0, 0, 0},              // 2g
    {0x0f, 0, 0, 0, 0xf0, 0, 0, 0},                 // 3g
    {0x0f, 0, 0, 0, 0, 0, 0, 0},                    // 4g
    {0xff, 0, 0, 0, 0, 0, 0, 0},                    // 7g
};
inline uint8_t MigPlacementMask(MigShape shape, int start) {
  return static_cast<unsigned>(start) < kMigMemorySlices &&
                 static_cast<unsigned>(shape) < kMigShapes
             ? kMigPlacementMasks[static_cast<int>(shape)][start]
             : 0;
}
// True when `shape` may start at `start` on a GPU whose taken memory slices are `taken`.
inline bool MigFitsAt(uint8_t taken, MigShape shape, int start) {
  const uint8_t m = MigPlacementMask(shape, start);
  return m != 0 && (taken & m) == 0;
}
// Bit k set: shape k has at least one free placement on a GPU with `taken` memory slices.
uint8_t MigPlaceableShapes(uint8_t taken);
// Instances of `shape` an empty GPU holds (7 of 1g, 2 of 3g, 1 of 4g).
int MigMaxInstances(MigShape shape);
// How much of the GPU's future a layout keeps: larger while bigger shapes can still be placed
// (lexicographic by shape, largest first, counting disjoint instances of each). Precomputed.
uint32_t MigLayoutValue(uint8_t taken);
// The allowed start for `shape` on `taken` that keeps the most MigLayoutValue; on a tie the
// highest, packing from the top where only small shapes start. -1 when the shape does not fit.
int MigBestStart(uint8_t taken, MigShape shape);

// The GPU instances that exist on one MIG GPU: at most one starting at each memory slice. The
// hardware runs tasks only in instances that exist, so a GPU whose layout is known places a MIG
// task only into a free instance of its shape; re-cutting idle instances is a reshape.
struct MigLayout {
  std::array<uint8_t, kMigMemorySlices> shape_at;  // by start slice: a MigShape, or kNoMigShape

  MigLayout() { shape_at.fill(kNoMigShape); }
  // The memory slices the instances take.
  uint8_t Mask() const;
  int Count() const;
  // Adds an instance; false (and nothing changes) when `start` is not one of the shape's starts
  // or it overlaps an instance already there.
  bool Add(MigShape shape, int start);
  // Removes the instance starting at `start`; false when there is none.
  bool Remove(int start);
  bool Has(MigShape shape, int start) const {
    return start >= 0 && start < kMigMemorySlices && shape_at[start] == static_cast<uint8_t>(shape);
  }
  // The instances that overlap memory slices `mask`, as a mask of their start slices.
  uint8_t StartsOverlapping(uint8_t mask) const;
  bool operator==(const MigLayout&) const = default;
};
// "1g.10gb@6,3g.40gb@0" on part `part` (or "empty").
std::string MigLayoutText(const MigLayout& layout, uint8_t part);

// One MIG part: its memory class and the names its profiles go by.
struct MigPart {
  std::string_view name;  // "H100-80GB"
  int64_t memory_mib;     // the part's GPU memory, as cluster.yaml or NVML states it
  std::string_view profiles[kMigShapes];  // by MigShape: "1g.10gb", "1g.20gb", ...
};
inline constexpr int kMigParts = 5;
std::span<const MigPart> MigParts();
// The part whose memory is nearest `gpu_memory_mib` (every MIG-mode GPU gets one).
uint8_t MigPartFor(int64_t gpu_memory_mib);
const MigPart& MigPartAt(uint8_t part);
// The shape that `profile` ("3g.40gb") names on part `part`; nullopt when that part has no
// profile of that name.
std::optional<MigShape> MigShapeOn(uint8_t part, std::string_view profile);
// True when some part has a profile of that name.
bool IsKnownMigProfile(std::string_view profile);
// "1g.10gb, 1g.12gb, ..." every known name, for error messages.
std::string KnownMigProfiles();

}  // namespace hangar::cluster
