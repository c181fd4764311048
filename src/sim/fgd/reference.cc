#include "sim/fgd/reference.h"

#include <algorithm>
#include <map>
#include <utility>

#include "sim/fgd/csv_rows.h"
#include "sim/fgd/openb_trace.h"

namespace hangar::sim::fgd {

namespace {

const std::vector<std::pair<std::string_view, std::string_view>>& PolicyTable() {
  static const std::vector<std::pair<std::string_view, std::string_view>> table = {
      {"random", "01-Random"},
      {"dot-product", "02-DotProd"},
      {"gpu-clustering", "03-GpuClustering"},
      {"gpu-packing", "04-GpuPacking"},
      {"best-fit", "05-BestFit"},
      {"fgd", "06-FGD"},
      {"hangar", "06-FGD"}};
  return table;
}

// Reads one of the two CSVs: seed -> curve for the rows of (workload, policy).
StatusOr<std::map<int64_t, Curve>> ReadCurves(const std::string& path, const std::string& workload,
                                              std::string_view policy) {
  HANGAR_ASSIGN_OR_RETURN(std::string text, ReadTextFile(path, "the reference file"));
  CsvRows rows(text, path);
  HANGAR_RETURN_IF_ERROR(rows.ReadHeader({"workload", "sc_policy", "seed", "0", "130"}));
  const size_t wl = *rows.Column("workload"), pol = *rows.Column("sc_policy"),
               seed = *rows.Column("seed"), first = *rows.Column("0");
  if (*rows.Column("130") != first + kColumns - 1) {
    return rows.Error("columns 0..130 must be adjacent in the header");
  }
  std::map<int64_t, Curve> out;
  for (;;) {
    HANGAR_ASSIGN_OR_RETURN(bool more, rows.Next());
    if (!more) break;
    if (rows.Field(wl) != workload || rows.Field(pol) != policy) continue;
    HANGAR_ASSIGN_OR_RETURN(int64_t s, rows.Int(seed, 0, INT64_MAX));
    Curve c;
    for (int k = 0; k < kColumns; ++k) {
      HANGAR_ASSIGN_OR_RETURN(c[k], rows.Decimal(first + k));
    }
    out[s] = c;
  }
  if (out.empty()) {
    return Status::NotFound(path + " has no rows for workload '" + workload + "' and policy '" +
                            std::string(policy) + "'");
  }
  return out;
}

}  // namespace

const std::vector<std::string_view>& FgdPolicyNames() {
  static const std::vector<std::string_view> names = [] {
    std::vector<std::string_view> v;
    for (const auto& [ours, theirs] : PolicyTable()) v.push_back(ours);
    return v;
  }();
  return names;
}

std::optional<std::string_view> ReferencePolicyFor(std::string_view policy) {
  for (const auto& [ours, theirs] : PolicyTable()) {
    if (ours == policy) return theirs;
  }
  return std::nullopt;
}

StatusOr<ReferenceSet> LoadReference(const std::string& dir, const std::string& workload,
                                     std::string_view policy) {
  HANGAR_ASSIGN_OR_RETURN(auto alloc,
                          ReadCurves(dir + "/analysis_allo_discrete.csv", workload, policy));
  HANGAR_ASSIGN_OR_RETURN(auto frag,
                          ReadCurves(dir + "/analysis_frag_discrete.csv", workload, policy));
  ReferenceSet set;
  set.policy = std::string(policy);
  for (const auto& [seed, curve] : alloc) {
    auto f = frag.find(seed);
    if (f == frag.end()) continue;  // a seed must be in both files to count
    set.runs.push_back({seed, curve, f->second});
  }
  if (set.runs.empty()) {
    return Status::NotFound("the reference files in " + dir + " share no seed for workload '" +
                            workload + "' and policy '" + std::string(policy) + "'");
  }
  return set;
}

}  // namespace hangar::sim::fgd
