// Slurm's host list form, both ways: node-[1-3,5],gpu-a.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace hangar::cluster {

// The compact form Slurm prints (SLURM_JOB_NODELIST, squeue's NODELIST): names that differ in a
// trailing number share a bracketed range list; zero padding is kept.
std::string CompressHostList(const std::vector<std::string>& hosts);
// Every name of a host list: "node-[1-3,5],gpu-a", "rack[1-2]-n[01-02]", or plain "a,b".
StatusOr<std::vector<std::string>> ExpandHostList(std::string_view list);

}  // namespace hangar::cluster
