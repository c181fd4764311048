// The MIG profiles a GPU offers, as the agent reports them (pb::GpuInfo::mig_profiles), and the
// check that a Launch's MIG instances are placements its GPUs offer. The NVML backend reads the
// profiles from the driver; the fake backend takes them from the geometry table
// (cluster/mig_geometry.h).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"
#include "proto/agent.pb.h"

namespace hangar::agent {

namespace pb = ::hangar::agent::v1;

// NVML's GPU instance profile indices for the shapes Hangar places, smallest first.
const std::vector<unsigned>& MigProfileIndices();
// The name of the profile with these slices on a GPU of this much memory ("3g.40gb"); "" when
// no MIG part has that shape.
std::string MigProfileName(int64_t gpu_memory_mib, unsigned compute_slices, unsigned memory_slices);
// Fills g->mig_profiles from the geometry table, for g's memory (the fake backend).
void AddTableMigProfiles(pb::GpuInfo* g);
// OK when every MIG instance of `l` names a MIG-mode GPU of `gpus` and a start and size that
// GPU's reported profile of that name allows (a GPU that reported no profiles is trusted);
// otherwise FailedPrecondition saying which instance and what the GPU offers.
Status CheckMigInstances(const std::vector<pb::GpuInfo>& gpus, const pb::Launch& l);

}  // namespace hangar::agent
