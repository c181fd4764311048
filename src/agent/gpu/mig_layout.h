// MIG layouts on the agent's side: the GPU instances a MIG GPU has now
// (pb::GpuInfo::mig_layout), the checks a reshape must pass before any instance is touched, and
// the static layout an agent may be given at start (--mig-layout). Geometry comes from
// cluster/mig_geometry.h; both GPU backends and the agent use these. Pure functions.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "common/status.h"
#include "proto/agent.pb.h"

namespace hangar::agent {

namespace pb = ::hangar::agent::v1;

using MigLayout = std::vector<pb::MigGpuInstance>;

// The memory slices the layout's instances take (bit s: slice s).
uint8_t MigTakenMask(const MigLayout& layout);
// "3g.40gb@0, 1g.10gb@6" (by start); "empty" for none.
std::string DescribeMigLayout(const MigLayout& layout);
// The instance of `layout` at exactly this start and size, or nullptr.
const pb::MigGpuInstance* FindMigInstance(const MigLayout& layout, uint32_t start,
                                          uint32_t memory_slices);

// Fills in an instance to create on a GPU of `gpu_memory_mib`: from its profile name when it has
// one (which must be this part's, with sizes that agree if given), else from its slice counts.
// Sets profile, compute_slices, memory_slices and nvml_profile; checks the start is allowed.
// InvalidArgument saying what is wrong otherwise.
Status CompleteMigInstance(int64_t gpu_memory_mib, pb::MigGpuInstance* mi);

// Whether re-cutting `layout` by destroying `destroy` (each must exist, by start and size) and
// then creating `create` (completed instances; they must fit in the freed and free slices and
// not overlap each other) is possible. FailedPrecondition naming the first problem.
Status CheckMigReshape(const MigLayout& layout, const MigLayout& destroy, const MigLayout& create);
// True when `layout` already is what the reshape makes: no instance of `destroy` left that is
// not also in `create`, and every instance of `create` present.
bool MigReshapeDone(const MigLayout& layout, const MigLayout& destroy, const MigLayout& create);

// A static layout: per GPU index, the profiles to create at start, each optionally pinned to a
// start slice ("3g.40gb@4"). Key -1: every MIG GPU not named.
struct StaticMigItem {
  std::string profile;
  int start = -1;  // -1: the best free start (largest instances placed first)
};
using StaticMigLayout = std::map<int, std::vector<StaticMigItem>>;

// Parses `--mig-layout`: "GPU:PROFILE[@START],...;GPU:..." with GPU an index or `*`, e.g.
// "0:3g.40gb,3g.40gb;1:7g.80gb" or "*:1g.10gb@6,2g.20gb,4g.40gb". "" parses to no layout.
StatusOr<StaticMigLayout> ParseStaticMigLayout(const std::string& text);
// The instances a static layout asks for on GPU `gpu` of `gpu_memory_mib` (empty when the layout
// names neither it nor `*`), with their starts: pinned ones first, then the rest largest first
// at MigBestStart. InvalidArgument when a profile is not this part's or they do not fit.
StatusOr<MigLayout> PlaceStaticMigLayout(const StaticMigLayout& layout, uint32_t gpu,
                                         int64_t gpu_memory_mib);

}  // namespace hangar::agent
