#include "cluster/mig_geometry.h"

#include <array>
#include <cstdlib>

namespace hangar::cluster {

namespace {

// NVML_GPU_INSTANCE_PROFILE_1_SLICE (0), _2_SLICE (1), _3_SLICE (2), _4_SLICE (3), _7_SLICE (4)
// and _1_SLICE_REV2 (9, one compute slice with twice the memory).
constexpr MigShapeInfo kShapes[kMigShapes] = {
    {1, 1, 0b0111'1111, 0},  // 1g: any of 0-6
    {1, 2, 0b0101'0101, 9},  // 1g, double memory: 0, 2, 4, 6
    {2, 2, 0b0001'0101, 1},  // 2g: 0, 2, 4
    {3, 4, 0b0001'0001, 2},  // 3g: 0, 4
    {4, 4, 0b0000'0001, 3},  // 4g: 0
    {7, 8, 0b0000'0001, 4},  // 7g: 0
};

// Profile names by part (NVIDIA MIG user guide, "Supported MIG Profiles"). A100-80GB and
// H100-80GB share their names; H100 NVL (94 GB) and GH200's H100 (96 GB) differ in 3g/4g/7g.
constexpr MigPart kParts[] = {
    {"A100-40GB", 40 * 1024, {"1g.5gb", "1g.10gb", "2g.10gb", "3g.20gb", "4g.20gb", "7g.40gb"}},
    {"A100/H100-80GB",
     80 * 1024,
     {"1g.10gb", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb"}},
    {"H100-94GB", 94 * 1024, {"1g.12gb", "1g.24gb", "2g.24gb", "3g.47gb", "4g.47gb", "7g.94gb"}},
    {"H100-96GB", 96 * 1024, {"1g.12gb", "1g.24gb", "2g.24gb", "3g.48gb", "4g.48gb", "7g.96gb"}},
    {"H200-141GB", 141 * 1024, {"1g.18gb", "1g.35gb", "2g.35gb", "3g.71gb", "4g.71gb", "7g.141gb"}},
};

static_assert(std::size(kParts) == kMigParts);

struct Tables {
  std::array<uint8_t, 256> placeable{};
  std::array<uint32_t, 256> value{};
};

// Disjoint instances of `shape` that still fit on `taken`: a shape's own placements never
// overlap one another, so that is the number of its free placements.
int FreePlacements(uint8_t taken, MigShape shape) {
  int n = 0;
  for (int s = 0; s < kMigMemorySlices; ++s) n += MigFitsAt(taken, shape, s);
  return n;
}

Tables BuildTables() {
  Tables t;
  for (int m = 0; m < 256; ++m) {
    uint32_t value = 0;
    for (int k = kMigShapes - 1; k >= 0; --k) {  // largest shape weighs most
      const int n = FreePlacements(static_cast<uint8_t>(m), static_cast<MigShape>(k));
      if (n > 0) t.placeable[m] |= static_cast<uint8_t>(1u << k);
      value = value * 8 + static_cast<uint32_t>(n);  // n <= 7: digits never carry
    }
    t.value[m] = value;
  }
  return t;
}

const Tables& GetTables() {
  static const Tables t = BuildTables();
  return t;
}

}  // namespace

const MigShapeInfo& ShapeInfo(MigShape shape) { return kShapes[static_cast<int>(shape)]; }

int MigMaxInstances(MigShape shape) { return FreePlacements(0, shape); }

uint8_t MigPlaceableShapes(uint8_t taken) { return GetTables().placeable[taken]; }

uint32_t MigLayoutValue(uint8_t taken) { return GetTables().value[taken]; }

int MigBestStart(uint8_t taken, MigShape shape) {
  int best = -1;
  uint32_t best_value = 0;
  for (int s = 0; s < kMigMemorySlices; ++s) {
    if (!MigFitsAt(taken, shape, s)) continue;
    const uint32_t v = MigLayoutValue(taken | MigPlacementMask(shape, s));
    if (best < 0 || v >= best_value) {  // ties: the highest start, packing from the top
      best = s;
      best_value = v;
    }
  }
  return best;
}

std::span<const MigPart> MigParts() { return kParts; }

uint8_t MigPartFor(int64_t gpu_memory_mib) {
  uint8_t best = 0;
  for (uint8_t p = 1; p < std::size(kParts); ++p) {
    if (std::llabs(kParts[p].memory_mib - gpu_memory_mib) <
        std::llabs(kParts[best].memory_mib - gpu_memory_mib)) {
      best = p;
    }
  }
  return best;
}

const MigPart& MigPartAt(uint8_t part) { return kParts[part]; }

std::optional<MigShape> MigShapeOn(uint8_t part, std::string_view profile) {
  for (int k = 0; k < kMigShapes; ++k) {
    if (kParts[part].profiles[k] == profile) return static_cast<MigShape>(k);
  }
  return std::nullopt;
}

bool IsKnownMigProfile(std::string_view profile) {
  for (uint8_t p = 0; p < std::size(kParts); ++p) {
    if (MigShapeOn(p, profile)) return true;
  }
  return false;
}

std::string KnownMigProfiles() {
  std::string out;
  for (const MigPart& part : kParts) {
    out += out.empty() ? "" : "; ";
    out += std::string(part.name) + ":";
    for (std::string_view name : part.profiles) out += " " + std::string(name);
  }
  return out;
}

uint8_t MigLayout::Mask() const {
  uint8_t m = 0;
  for (int s = 0; s < kMigMemorySlices; ++s) {
    if (shape_at[s] != kNoMigShape) m |= MigPlacementMask(static_cast<MigShape>(shape_at[s]), s);
  }
  return m;
}

int MigLayout::Count() const {
  int n = 0;
  for (uint8_t sh : shape_at) n += sh != kNoMigShape;
  return n;
}

bool MigLayout::Add(MigShape shape, int start) {
  if (start < 0 || start >= kMigMemorySlices || !MigFitsAt(Mask(), shape, start)) return false;
  shape_at[start] = static_cast<uint8_t>(shape);
  return true;
}

bool MigLayout::Remove(int start) {
  if (start < 0 || start >= kMigMemorySlices || shape_at[start] == kNoMigShape) return false;
  shape_at[start] = kNoMigShape;
  return true;
}

uint8_t MigLayout::StartsOverlapping(uint8_t mask) const {
  uint8_t starts = 0;
  for (int s = 0; s < kMigMemorySlices; ++s) {
    if (shape_at[s] != kNoMigShape &&
        (MigPlacementMask(static_cast<MigShape>(shape_at[s]), s) & mask)) {
      starts |= static_cast<uint8_t>(1u << s);
    }
  }
  return starts;
}

std::string MigLayoutText(const MigLayout& layout, uint8_t part) {
  std::string out;
  for (int s = 0; s < kMigMemorySlices; ++s) {
    if (layout.shape_at[s] == kNoMigShape) continue;
    if (!out.empty()) out += ',';
    out += std::string(MigPartAt(part).profiles[layout.shape_at[s]]) + "@" + std::to_string(s);
  }
  return out.empty() ? "empty" : out;
}

}  // namespace hangar::cluster
