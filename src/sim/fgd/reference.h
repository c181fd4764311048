// The FGD authors' published curves (fgd_reference/analysis_{allo,frag}_discrete.csv): one row
// per workload, policy and seed, columns 0..130 as in discrete_metrics.h.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "sim/fgd/discrete_metrics.h"

namespace hangar::sim::fgd {

// The policies `hangar sim fgd` runs, in the paper's order.
const std::vector<std::string_view>& FgdPolicyNames();

// The published policy a Hangar policy is compared with: "best-fit" -> "05-BestFit", ...;
// "hangar" -> "06-FGD" (the policy to beat). nullopt for an unknown name.
std::optional<std::string_view> ReferencePolicyFor(std::string_view policy);

struct ReferenceRun {
  int64_t seed = 0;
  Curve alloc;
  Curve frag;
};

struct ReferenceSet {
  std::string policy;              // e.g. "06-FGD"
  std::vector<ReferenceRun> runs;  // sorted by seed
};

// Reads the rows of `workload` (e.g. "openb_pod_list_default") and `policy` from the two CSVs in
// `dir`. NotFound when a file cannot be read or has no such rows; InvalidArgument on a
// malformed row (file:line).
StatusOr<ReferenceSet> LoadReference(const std::string& dir, const std::string& workload,
                                     std::string_view policy);

}  // namespace hangar::sim::fgd
