#include "agent/gpu/mig_profiles.h"

#include <algorithm>

#include "cluster/mig_geometry.h"

namespace hangar::agent {

const std::vector<unsigned>& MigProfileIndices() {
  static const std::vector<unsigned> kIndices = [] {
    std::vector<unsigned> v;
    for (int k = 0; k < cluster::kMigShapes; ++k) {
      v.push_back(cluster::ShapeInfo(static_cast<cluster::MigShape>(k)).nvml_profile);
    }
    return v;
  }();
  return kIndices;
}

std::string MigProfileName(int64_t gpu_memory_mib, unsigned compute_slices,
                           unsigned memory_slices) {
  const cluster::MigPart& part = cluster::MigPartAt(cluster::MigPartFor(gpu_memory_mib));
  for (int k = 0; k < cluster::kMigShapes; ++k) {
    const auto& s = cluster::ShapeInfo(static_cast<cluster::MigShape>(k));
    if (static_cast<unsigned>(s.compute_slices) == compute_slices &&
        static_cast<unsigned>(s.memory_slices) == memory_slices) {
      return std::string(part.profiles[k]);
    }
  }
  return "";
}

void AddTableMigProfiles(pb::GpuInfo* g) {
  const int64_t memory = static_cast<int64_t>(g->memory_mib());
  for (int k = 0; k < cluster::kMigShapes; ++k) {
    const auto shape = static_cast<cluster::MigShape>(k);
    const auto& s = cluster::ShapeInfo(shape);
    pb::MigProfile* p = g->add_mig_profiles();
    p->set_nvml_profile(s.nvml_profile);
    p->set_name(MigProfileName(memory, s.compute_slices, s.memory_slices));
    p->set_compute_slices(static_cast<uint32_t>(s.compute_slices));
    p->set_memory_slices(static_cast<uint32_t>(s.memory_slices));
    p->set_memory_mib(static_cast<uint64_t>(memory * s.memory_slices / cluster::kMigMemorySlices));
    p->set_instances(static_cast<uint32_t>(cluster::MigMaxInstances(shape)));
    for (int start = 0; start < cluster::kMigMemorySlices; ++start) {
      if (cluster::MigPlacementMask(shape, start)) p->add_starts(static_cast<uint32_t>(start));
    }
  }
}

namespace {

std::string Offers(const pb::MigProfile& p) {
  std::string starts;
  for (uint32_t s : p.starts()) starts += (starts.empty() ? "" : ", ") + std::to_string(s);
  return p.name() + " starts at " + (starts.empty() ? "none" : starts);
}

Status CheckOne(const pb::GpuInfo& gpu, const pb::MigInstance& mi) {
  const std::string where = "GPU " + std::to_string(mi.gpu_index());
  if (!gpu.mig())
    return Status::FailedPrecondition(
        where + " is not in MIG mode; the controller's view of this node is stale");
  if (gpu.mig_profiles().empty()) return Status::Ok();
  for (const pb::MigProfile& p : gpu.mig_profiles()) {
    if (p.name() != mi.profile()) continue;
    const bool start_ok =
        std::find(p.starts().begin(), p.starts().end(), mi.start()) != p.starts().end();
    if (start_ok && p.memory_slices() == mi.memory_slices()) return Status::Ok();
    return Status::FailedPrecondition(where + " offers " + Offers(p) + " (" +
                                      std::to_string(p.memory_slices()) +
                                      " memory slices), not slice " + std::to_string(mi.start()));
  }
  return Status::FailedPrecondition(
      where + " has no MIG profile " + mi.profile() +
      "; its GPUs' memory names another part (see `hangar gpu-check`)");
}

}  // namespace

Status CheckMigInstances(const std::vector<pb::GpuInfo>& gpus, const pb::Launch& l) {
  for (const pb::MigInstance& mi : l.mig_instances()) {
    auto it = std::find_if(gpus.begin(), gpus.end(),
                           [&](const pb::GpuInfo& g) { return g.index() == mi.gpu_index(); });
    if (it == gpus.end())
      return Status::NotFound("GPU " + std::to_string(mi.gpu_index()) + " is not on this node");
    HANGAR_RETURN_IF_ERROR(CheckOne(*it, mi));
  }
  return Status::Ok();
}

}  // namespace hangar::agent
