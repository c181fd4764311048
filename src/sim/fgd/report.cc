#include "sim/fgd/report.h"

#include <cmath>

namespace hangar::sim::fgd {

namespace {

// Means are rounded to 1e-6 so that float noise does not leak into the report's digits.
nlohmann::json Value(std::optional<double> v) {
  if (!v) return nullptr;
  return std::round(*v * 1e6) / 1e6;
}

nlohmann::json CurveJson(const Curve& c) {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& v : c) out.push_back(Value(v));
  return out;
}

nlohmann::json ColumnJson(const std::vector<Curve>& curves, int k) {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& c : curves) out.push_back(Value(c[k]));
  return out;
}

// The keys shared by our runs and the reference's.
nlohmann::json CurvesJson(const SeedCurves& c) {
  nlohmann::json j;
  j["seeds"] = c.seeds;
  const Headline h = HeadlineOf(c);
  j["alloc_at_100"] = Value(h.alloc_at_100);
  j["alloc_at_130"] = Value(h.alloc_at_130);
  j["frag_at_100"] = Value(h.frag_at_100);
  j["per_seed"]["alloc_at_100"] = ColumnJson(c.alloc, 100);
  j["per_seed"]["alloc_at_130"] = ColumnJson(c.alloc, 130);
  j["per_seed"]["frag_at_100"] = ColumnJson(c.frag, 100);
  nlohmann::json& curves = j["curves"];
  curves["alloc"] = nlohmann::json::array();
  curves["frag"] = nlohmann::json::array();
  for (int k = 0; k < kColumns; ++k) {
    curves["alloc"].push_back(Value(MeanAt(c.alloc, k)));
    curves["frag"].push_back(Value(MeanAt(c.frag, k)));
  }
  curves["per_seed_alloc"] = nlohmann::json::array();
  curves["per_seed_frag"] = nlohmann::json::array();
  for (size_t i = 0; i < c.seeds.size(); ++i) {
    curves["per_seed_alloc"].push_back(CurveJson(c.alloc[i]));
    curves["per_seed_frag"].push_back(CurveJson(c.frag[i]));
  }
  return j;
}

}  // namespace

SeedCurves CurvesOf(const std::vector<RunResult>& runs) {
  SeedCurves c;
  for (const auto& r : runs) {
    c.seeds.push_back(r.seed);
    c.alloc.push_back(r.alloc);
    c.frag.push_back(r.frag);
  }
  return c;
}

SeedCurves CurvesOf(const ReferenceSet& reference) {
  SeedCurves c;
  for (const auto& r : reference.runs) {
    c.seeds.push_back(r.seed);
    c.alloc.push_back(r.alloc);
    c.frag.push_back(r.frag);
  }
  return c;
}

std::optional<double> MeanAt(const std::vector<Curve>& curves, int k) {
  double sum = 0;
  int n = 0;
  for (const auto& c : curves) {
    if (c[k]) sum += *c[k], ++n;
  }
  if (n == 0) return std::nullopt;
  return sum / n;
}

Stranding StrandingOf(const std::vector<RunResult>& runs) {
  auto mean = [&](std::optional<double> RunResult::*field) -> std::optional<double> {
    double sum = 0;
    int n = 0;
    for (const auto& r : runs) {
      if (r.*field) sum += *(r.*field), ++n;
    }
    if (n == 0) return std::nullopt;
    return sum / n;
  };
  return {mean(&RunResult::stranded_at_100), mean(&RunResult::starved_at_100)};
}

Headline HeadlineOf(const SeedCurves& c) {
  return {MeanAt(c.alloc, 100), MeanAt(c.alloc, 130), MeanAt(c.frag, 100)};
}

nlohmann::json ReportJson(const std::string& policy, const std::string& workload, double tune,
                          const std::vector<RunResult>& runs, const ReferenceSet* reference) {
  nlohmann::json j = CurvesJson(CurvesOf(runs));
  j["policy"] = policy;
  j["workload"] = workload;
  j["tune"] = tune;
  nlohmann::json& per = j["per_seed"];
  per["pods"] = nlohmann::json::array();
  per["failed"] = nlohmann::json::array();
  per["stranded_at_100"] = nlohmann::json::array();
  per["starved_at_100"] = nlohmann::json::array();
  for (const auto& r : runs) {
    per["pods"].push_back(r.pods);
    per["failed"].push_back(r.failed);
    per["stranded_at_100"].push_back(Value(r.stranded_at_100));
    per["starved_at_100"].push_back(Value(r.starved_at_100));
  }
  const Stranding st = StrandingOf(runs);
  j["stranded_at_100"] = Value(st.stranded_at_100);
  j["starved_at_100"] = Value(st.starved_at_100);
  if (reference) {
    j["reference"] = CurvesJson(CurvesOf(*reference));
    j["reference"]["policy"] = reference->policy;
  }
  return j;
}

}  // namespace hangar::sim::fgd
