#include "agent/gpu/mig_layout.h"

#include <algorithm>
#include <cctype>
#include <sstream>

#include "cluster/mig_geometry.h"

namespace hangar::agent {

namespace {

using cluster::MigShape;

std::string Where(const pb::MigGpuInstance& mi) {
  return (mi.profile().empty() ? std::to_string(mi.memory_slices()) + "-slice instance"
                               : mi.profile()) +
         " at slice " + std::to_string(mi.start());
}

uint8_t MaskOf(const pb::MigGpuInstance& mi) {
  if (mi.start() >= static_cast<uint32_t>(cluster::kMigMemorySlices) || mi.memory_slices() == 0 ||
      mi.start() + mi.memory_slices() > static_cast<uint32_t>(cluster::kMigMemorySlices)) {
    return 0;
  }
  return static_cast<uint8_t>(((1u << mi.memory_slices()) - 1) << mi.start());
}

std::optional<MigShape> ShapeOfSlices(uint32_t compute, uint32_t memory) {
  for (int k = 0; k < cluster::kMigShapes; ++k) {
    const auto& s = cluster::ShapeInfo(static_cast<MigShape>(k));
    if (static_cast<uint32_t>(s.compute_slices) == compute &&
        static_cast<uint32_t>(s.memory_slices) == memory) {
      return static_cast<MigShape>(k);
    }
  }
  return std::nullopt;
}

std::string Trim(std::string s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.pop_back();
  size_t i = 0;
  while (i < s.size() && std::isspace(static_cast<unsigned char>(s[i]))) ++i;
  return s.substr(i);
}

StatusOr<StaticMigItem> ParseItem(const std::string& text, const std::string& gpu) {
  StaticMigItem item;
  const size_t at = text.find('@');
  item.profile = Trim(text.substr(0, at));
  if (!cluster::IsKnownMigProfile(item.profile)) {
    return Status::InvalidArgument("--mig-layout GPU " + gpu + ": '" + item.profile +
                                   "' is not a MIG profile; known: " + cluster::KnownMigProfiles());
  }
  if (at != std::string::npos) {
    const std::string start = Trim(text.substr(at + 1));
    if (start.size() != 1 || start[0] < '0' || start[0] > '7') {
      return Status::InvalidArgument("--mig-layout GPU " + gpu + ": start '" + start + "' of " +
                                     item.profile + " must be a memory slice, 0 to 7");
    }
    item.start = start[0] - '0';
  }
  return item;
}

}  // namespace

uint8_t MigTakenMask(const MigLayout& layout) {
  uint8_t taken = 0;
  for (const auto& mi : layout) taken |= MaskOf(mi);
  return taken;
}

std::string DescribeMigLayout(const MigLayout& layout) {
  MigLayout sorted = layout;
  std::sort(sorted.begin(), sorted.end(),
            [](const auto& a, const auto& b) { return a.start() < b.start(); });
  std::string out;
  for (const auto& mi : sorted) {
    out += (out.empty() ? "" : ", ") + (mi.profile().empty() ? "?" : mi.profile()) + "@" +
           std::to_string(mi.start());
  }
  return out.empty() ? "empty" : out;
}

const pb::MigGpuInstance* FindMigInstance(const MigLayout& layout, uint32_t start,
                                          uint32_t memory_slices) {
  for (const auto& mi : layout) {
    if (mi.start() == start && mi.memory_slices() == memory_slices) return &mi;
  }
  return nullptr;
}

Status CompleteMigInstance(int64_t gpu_memory_mib, pb::MigGpuInstance* mi) {
  const uint8_t part = cluster::MigPartFor(gpu_memory_mib);
  const std::string part_name(cluster::MigPartAt(part).name);
  std::optional<MigShape> shape;
  if (!mi->profile().empty()) {
    shape = cluster::MigShapeOn(part, mi->profile());
    if (!shape) {
      return Status::InvalidArgument("MIG profile '" + mi->profile() + "' is not one of " +
                                     part_name + "'s (this GPU's part)");
    }
  } else {
    shape = ShapeOfSlices(mi->compute_slices(), mi->memory_slices());
    if (!shape) {
      return Status::InvalidArgument("no MIG profile has " + std::to_string(mi->compute_slices()) +
                                     " compute and " + std::to_string(mi->memory_slices()) +
                                     " memory slices");
    }
  }
  const auto& s = cluster::ShapeInfo(*shape);
  if ((mi->memory_slices() && mi->memory_slices() != static_cast<uint32_t>(s.memory_slices)) ||
      (mi->compute_slices() && mi->compute_slices() != static_cast<uint32_t>(s.compute_slices))) {
    return Status::InvalidArgument(mi->profile() + " has " + std::to_string(s.compute_slices) +
                                   " compute and " + std::to_string(s.memory_slices) +
                                   " memory slices, not the " +
                                   std::to_string(mi->compute_slices()) + " and " +
                                   std::to_string(mi->memory_slices()) + " asked for");
  }
  mi->set_profile(std::string(cluster::MigPartAt(part).profiles[static_cast<int>(*shape)]));
  mi->set_compute_slices(static_cast<uint32_t>(s.compute_slices));
  mi->set_memory_slices(static_cast<uint32_t>(s.memory_slices));
  mi->set_nvml_profile(s.nvml_profile);
  if (!cluster::MigPlacementMask(*shape, static_cast<int>(mi->start()))) {
    std::string starts;
    for (int i = 0; i < cluster::kMigMemorySlices; ++i) {
      if (cluster::MigPlacementMask(*shape, i))
        starts += (starts.empty() ? "" : ", ") + std::to_string(i);
    }
    return Status::InvalidArgument(mi->profile() + " may start at slice " + starts + ", not at " +
                                   std::to_string(mi->start()));
  }
  return Status::Ok();
}

Status CheckMigReshape(const MigLayout& layout, const MigLayout& destroy, const MigLayout& create) {
  uint8_t taken = MigTakenMask(layout);
  for (const auto& d : destroy) {
    const pb::MigGpuInstance* have = FindMigInstance(layout, d.start(), d.memory_slices());
    if (!have) {
      return Status::FailedPrecondition(
          "there is no " + Where(d) + " (" + std::to_string(d.memory_slices()) +
          " memory slices) to destroy; the GPU has " + DescribeMigLayout(layout));
    }
    if (!d.profile().empty() && d.profile() != have->profile()) {
      return Status::FailedPrecondition("the instance at slice " + std::to_string(d.start()) +
                                        " is " + have->profile() + ", not " + d.profile() +
                                        "; the GPU has " + DescribeMigLayout(layout));
    }
    taken &= static_cast<uint8_t>(~MaskOf(*have));
  }
  for (const auto& c : create) {
    const uint8_t m = MaskOf(c);
    if (m == 0)
      return Status::FailedPrecondition(Where(c) + " does not lie on the GPU's 8 memory slices");
    if (taken & m) {
      return Status::FailedPrecondition(Where(c) +
                                        " overlaps an instance that stays (the GPU has " +
                                        DescribeMigLayout(layout) + ") or another one to create");
    }
    taken |= m;
  }
  return Status::Ok();
}

bool MigReshapeDone(const MigLayout& layout, const MigLayout& destroy, const MigLayout& create) {
  for (const auto& c : create) {
    const pb::MigGpuInstance* have = FindMigInstance(layout, c.start(), c.memory_slices());
    if (!have || have->uuid().empty() || (!c.profile().empty() && have->profile() != c.profile())) {
      return false;
    }
  }
  for (const auto& d : destroy) {
    if (FindMigInstance(layout, d.start(), d.memory_slices()) &&
        !FindMigInstance(create, d.start(), d.memory_slices())) {
      return false;
    }
  }
  return true;
}

StatusOr<StaticMigLayout> ParseStaticMigLayout(const std::string& text) {
  StaticMigLayout out;
  std::stringstream in(text);
  for (std::string entry; std::getline(in, entry, ';');) {
    entry = Trim(entry);
    if (entry.empty()) continue;
    const size_t colon = entry.find(':');
    if (colon == std::string::npos) {
      return Status::InvalidArgument(
          "--mig-layout entry '" + entry +
          "' is not GPU:PROFILE,... (e.g. 0:3g.40gb,3g.40gb or *:7g.80gb)");
    }
    const std::string gpu = Trim(entry.substr(0, colon));
    int index = -1;
    if (gpu != "*") {
      if (gpu.empty() || !std::all_of(gpu.begin(), gpu.end(), ::isdigit) || gpu.size() > 2) {
        return Status::InvalidArgument("--mig-layout: '" + gpu + "' is not a GPU index or *");
      }
      index = std::stoi(gpu);
    }
    if (out.count(index))
      return Status::InvalidArgument("--mig-layout names GPU " + gpu + " twice");
    std::vector<StaticMigItem>& items = out[index];
    std::stringstream list(entry.substr(colon + 1));
    for (std::string p; std::getline(list, p, ',');) {
      if (Trim(p).empty()) continue;
      HANGAR_ASSIGN_OR_RETURN(StaticMigItem item, ParseItem(p, gpu));
      items.push_back(std::move(item));
    }
  }
  return out;
}

StatusOr<MigLayout> PlaceStaticMigLayout(const StaticMigLayout& layout, uint32_t gpu,
                                         int64_t gpu_memory_mib) {
  auto it = layout.find(static_cast<int>(gpu));
  if (it == layout.end()) it = layout.find(-1);
  if (it == layout.end()) return MigLayout{};
  const uint8_t part = cluster::MigPartFor(gpu_memory_mib);
  std::vector<std::pair<MigShape, StaticMigItem>> items;
  for (const auto& item : it->second) {
    auto shape = cluster::MigShapeOn(part, item.profile);
    if (!shape) {
      return Status::InvalidArgument("--mig-layout GPU " + std::to_string(gpu) + ": " +
                                     item.profile + " is not a profile of this GPU's part (" +
                                     std::string(cluster::MigPartAt(part).name) + ")");
    }
    items.emplace_back(*shape, item);
  }
  // Pinned first, then largest first: small ones fill what the large leave.
  std::stable_sort(items.begin(), items.end(), [](const auto& a, const auto& b) {
    if ((a.second.start >= 0) != (b.second.start >= 0)) return a.second.start >= 0;
    return a.first > b.first;
  });
  MigLayout out;
  uint8_t taken = 0;
  for (const auto& [shape, item] : items) {
    const int start = item.start >= 0 ? item.start : cluster::MigBestStart(taken, shape);
    if (start < 0 || !cluster::MigFitsAt(taken, shape, start)) {
      return Status::InvalidArgument("--mig-layout GPU " + std::to_string(gpu) + ": " +
                                     item.profile +
                                     (item.start >= 0 ? " at slice " + std::to_string(start) : "") +
                                     " does not fit beside " + DescribeMigLayout(out));
    }
    pb::MigGpuInstance mi;
    mi.set_profile(item.profile);
    mi.set_start(static_cast<uint32_t>(start));
    HANGAR_RETURN_IF_ERROR(CompleteMigInstance(gpu_memory_mib, &mi));
    taken |= cluster::MigPlacementMask(shape, start);
    out.push_back(std::move(mi));
  }
  return out;
}

}  // namespace hangar::agent
