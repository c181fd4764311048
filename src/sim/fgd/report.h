// The JSON report of `hangar sim fgd` and the headline numbers it is summarised by.
//
// Keys: "policy", "workload", "tune", "cpu_scale", "seeds"; the means over seeds "alloc_at_100",
// "alloc_at_130", "frag_at_100", "stranded_at_100", "starved_at_100" (% of the GPUs; see
// RunResult); "per_seed" (those five per seed, plus "pods" and "failed");
// "curves" ("alloc" and "frag": the mean per column 0..130; "per_seed_alloc", "per_seed_frag":
// one array per seed); and, with a reference, "reference" holding the same keys for the
// published runs of the same workload and the compared policy. Values are percent of the
// cluster's GPU capacity; a column with no sample is null.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "sim/fgd/discrete_metrics.h"
#include "sim/fgd/protocol.h"
#include "sim/fgd/reference.h"

namespace hangar::sim::fgd {

// Curves of several seeds, ours or published.
struct SeedCurves {
  std::vector<int64_t> seeds;
  std::vector<Curve> alloc;
  std::vector<Curve> frag;
};

SeedCurves CurvesOf(const std::vector<RunResult>& runs);
SeedCurves CurvesOf(const ReferenceSet& reference);

// Mean over seeds of column k, over the seeds that have a value there.
std::optional<double> MeanAt(const std::vector<Curve>& curves, int k);

struct Headline {
  std::optional<double> alloc_at_100, alloc_at_130, frag_at_100;
};
Headline HeadlineOf(const SeedCurves& c);

// Means over the seeds that reached 100 % arrived (RunResult's stranded and starved shares).
struct Stranding {
  std::optional<double> stranded_at_100, starved_at_100;
};
Stranding StrandingOf(const std::vector<RunResult>& runs);

nlohmann::json ReportJson(const std::string& policy, const std::string& workload, double tune,
                          const std::vector<RunResult>& runs, const ReferenceSet* reference);

}  // namespace hangar::sim::fgd
