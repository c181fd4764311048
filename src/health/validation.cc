#include "health/validation.h"

#include <algorithm>

#include "health/text.h"

namespace hangar::health {
namespace {

constexpr std::array<Metric, 4> kGpuMetrics = {Metric::kGemmTflops, Metric::kMemBwGbs,
                                               Metric::kH2dGbs, Metric::kD2hGbs};

std::string_view Unit(Metric m) {
  switch (m) {
    case Metric::kGemmTflops:
      return "TFLOPS";
    case Metric::kNcclLatencyUs:
      return "us";
    default:
      return "GB/s";
  }
}

double ValueOf(const GpuBenchmark& b, Metric m) {
  switch (m) {
    case Metric::kGemmTflops:
      return b.gemm_tflops;
    case Metric::kMemBwGbs:
      return b.mem_bw_gbs;
    case Metric::kH2dGbs:
      return b.h2d_gbs;
    case Metric::kD2hGbs:
      return b.d2h_gbs;
    default:
      return 0;
  }
}

double PeakOf(const ModelReference& r, Metric m) {
  GpuBenchmark b{0, r.gemm_tflops, r.mem_bw_gbs, r.h2d_gbs, r.d2h_gbs};
  return ValueOf(b, m);
}

double MedianOfValues(std::vector<double> v) {
  if (v.empty()) return 0;
  size_t mid = v.size() / 2;
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(mid), v.end());
  double upper = v[mid];
  if (v.size() % 2 == 1) return upper;
  double lower = *std::max_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(mid));
  return (lower + upper) / 2;
}

// How much worse than `median` the value is, as a fraction (negative: better).
double Shortfall(Metric m, double value, double median) {
  return LowerIsBetter(m) ? (value - median) / median : (median - value) / median;
}

Finding MakeFinding(std::string key, std::string type, Effect effect, Scope scope, int gpu,
                    RecommendedAction action, std::string reason) {
  Finding f;
  f.key = std::move(key);
  f.condition.type = std::move(type);
  f.condition.effect = effect;
  f.condition.scope = scope;
  f.condition.gpu = gpu;
  f.condition.action = action;
  f.condition.reason = std::move(reason);
  f.clearing = Clearing::kOnValidation;
  return f;
}

// Compares one measured value with a median; returns its band and adds an outlier finding.
int Compare(Metric m, double value, double median, std::string_view against, Scope scope, int gpu,
            const std::string& who, const ValidationPolicy& p, std::vector<Finding>* out) {
  if (median <= 0) return 0;
  double shortfall = Shortfall(m, value, median);
  if (shortfall > p.outlier_fraction) {
    std::string name(MetricName(m));
    out->push_back(MakeFinding(
        "validation_outlier_" + name, "validation_outlier", Effect::kDegrade, scope, gpu,
        RecommendedAction::kRunValidation,
        who + " " + name + " " + Fixed(value, 1) + " " + std::string(Unit(m)) + " is " +
            Percent(shortfall) + (LowerIsBetter(m) ? " above " : " below ") + std::string(against) +
            " " + Fixed(median, 1) + " (limit " + Percent(p.outlier_fraction) + ")"));
    return 2;
  }
  return shortfall <= p.band0_fraction ? 0 : 1;
}

const ModelReference* ReferenceFor(std::string_view model, const ValidationPolicy& p) {
  for (const ModelReference& r : p.references) {
    if (r.model == model) return &r;
  }
  return nullptr;
}

GpuVerdict JudgeGpu(const GpuBenchmark& b, const ValidationReport& r, std::string_view model,
                    const FleetResults& fleet, const ValidationPolicy& p, bool* fleet_compared) {
  GpuVerdict v;
  v.index = b.index;
  std::string who = "GPU " + std::to_string(b.index);
  const ModelReference* ref = ReferenceFor(model, p);
  for (Metric m : kGpuMetrics) {
    double value = ValueOf(b, m);
    if (value <= 0) continue;
    std::string name(MetricName(m));
    double floor = ref != nullptr ? p.floor_fraction * PeakOf(*ref, m) : 0;
    if (value < floor) {
      v.findings.push_back(MakeFinding(
          "validation_below_floor_" + name, "validation_below_floor", Effect::kDrain, Scope::kGpu,
          b.index, RecommendedAction::kDrainGpuAndReset,
          who + " " + name + " " + Fixed(value, 1) + " " + std::string(Unit(m)) +
              " is below the floor " + Fixed(floor, 1) + " (" + Fixed(p.floor_fraction, 2) +
              " x the " + std::string(model) + " reference " + Fixed(PeakOf(*ref, m), 1) + ")"));
    }
    FleetResults::Median fm = fleet.MedianOf(model, m);
    if (fm.nodes >= p.min_fleet_nodes) {
      *fleet_compared = true;
      std::string against = "the fleet median for " + std::string(model);
      v.band = std::max(
          v.band, Compare(m, value, fm.value, against, Scope::kGpu, b.index, who, p, &v.findings));
      continue;
    }
    std::vector<double> peers;
    for (const GpuBenchmark& other : r.gpus) {
      if (ValueOf(other, m) > 0) peers.push_back(ValueOf(other, m));
    }
    if (static_cast<int>(peers.size()) >= p.min_peer_gpus) {
      // Peers only flag outliers: a band relative to one node means nothing across nodes.
      Compare(m, value, MedianOfValues(peers), "the median of its node's GPUs", Scope::kGpu,
              b.index, who, p, &v.findings);
    }
  }
  return v;
}

int JudgeNode(const ValidationReport& r, std::string_view model, bool nvlink,
              const FleetResults& fleet, const ValidationPolicy& p, bool* fleet_compared,
              std::vector<Finding>* out) {
  int band = 0;
  if (r.nccl_busbw_gbs > 0) {
    double floor = nvlink ? p.nccl_floor_nvlink_gbs : p.nccl_floor_pcie_gbs;
    if (r.nccl_busbw_gbs < floor) {
      out->push_back(MakeFinding("nccl_below_floor", "nccl_below_floor", Effect::kDrain,
                                 Scope::kNode, -1, RecommendedAction::kDrainNodeAndReboot,
                                 "NCCL all-reduce bus bandwidth " + Fixed(r.nccl_busbw_gbs, 1) +
                                     " GB/s is below the " + (nvlink ? "NVLink" : "PCIe") +
                                     " single-node floor " + Fixed(floor, 1) + " GB/s"));
    }
  }
  for (Metric m : {Metric::kNcclBusBwGbs, Metric::kNcclLatencyUs}) {
    double value = m == Metric::kNcclBusBwGbs ? r.nccl_busbw_gbs : r.nccl_latency_us;
    if (value <= 0) continue;
    FleetResults::Median fm = fleet.MedianOf(model, m);
    if (fm.nodes < p.min_fleet_nodes) continue;
    *fleet_compared = true;
    std::string against = "the fleet median for " + std::string(model);
    band = std::max(band, Compare(m, value, fm.value, against, Scope::kNode, -1, "NCCL", p, out));
  }
  return band;
}

}  // namespace

std::string_view MetricName(Metric m) {
  switch (m) {
    case Metric::kGemmTflops:
      return "gemm_tflops";
    case Metric::kMemBwGbs:
      return "mem_bw_gbs";
    case Metric::kH2dGbs:
      return "h2d_gbs";
    case Metric::kD2hGbs:
      return "d2h_gbs";
    case Metric::kNcclBusBwGbs:
      return "nccl_busbw_gbs";
    case Metric::kNcclLatencyUs:
      return "nccl_latency_us";
  }
  return "?";
}

bool IsGpuMetric(Metric m) { return m != Metric::kNcclBusBwGbs && m != Metric::kNcclLatencyUs; }
bool LowerIsBetter(Metric m) { return m == Metric::kNcclLatencyUs; }

void FleetResults::Record(uint32_t node, const std::string& model, const ValidationReport& r) {
  if (!r.ran) return;
  if (latest_.size() <= node) latest_.resize(node + 1);
  Entry& e = latest_[node];
  if (!e.recorded || e.model != model) e = Entry{true, model, {}, 0, 0};
  records_[model]++;
  for (const GpuBenchmark& b : r.gpus) {
    auto at = std::lower_bound(e.gpus.begin(), e.gpus.end(), b.index,
                               [](const GpuBenchmark& x, uint16_t i) { return x.index < i; });
    if (at != e.gpus.end() && at->index == b.index) {
      *at = b;
    } else {
      e.gpus.insert(at, b);
    }
  }
  if (r.nccl_busbw_gbs > 0) e.nccl_busbw_gbs = r.nccl_busbw_gbs;
  if (r.nccl_latency_us > 0) e.nccl_latency_us = r.nccl_latency_us;
}

FleetResults::Median FleetResults::MedianOf(std::string_view model, Metric m) const {
  auto rec = records_.find(model);
  const uint64_t records = rec == records_.end() ? 0 : rec->second;
  const std::pair<std::string, int> key{std::string(model), static_cast<int>(m)};
  auto cached = cache_.find(key);
  if (cached != cache_.end() && cached->second.median.nodes >= 64 &&
      (records - cached->second.at_records) * 16 <=
          static_cast<uint64_t>(cached->second.median.nodes)) {
    return cached->second.median;
  }
  const Median exact = ExactMedianOf(model, m);
  cache_[key] = {exact, records};
  return exact;
}

FleetResults::Median FleetResults::ExactMedianOf(std::string_view model, Metric m) const {
  std::vector<double> values;
  int nodes = 0;
  for (const Entry& e : latest_) {
    if (!e.recorded || e.model != model) continue;
    size_t before = values.size();
    if (IsGpuMetric(m)) {
      for (const GpuBenchmark& b : e.gpus) {
        if (ValueOf(b, m) > 0) values.push_back(ValueOf(b, m));
      }
    } else {
      double v = m == Metric::kNcclBusBwGbs ? e.nccl_busbw_gbs : e.nccl_latency_us;
      if (v > 0) values.push_back(v);
    }
    nodes += values.size() > before;
  }
  return {MedianOfValues(std::move(values)), nodes};
}

ValidationVerdict JudgeValidation(const ValidationReport& r, std::string_view model, bool nvlink,
                                  const FleetResults& fleet, const ValidationPolicy& p) {
  ValidationVerdict v;
  for (const GpuBenchmark& b : r.gpus) {
    v.gpus.push_back(JudgeGpu(b, r, model, fleet, p, &v.fleet_compared));
    v.band = std::max(v.band, v.gpus.back().band);
  }
  v.node_measured = r.nccl_busbw_gbs > 0 || r.nccl_latency_us > 0;
  v.node_band = JudgeNode(r, model, nvlink, fleet, p, &v.fleet_compared, &v.node_findings);
  v.band = std::max(v.band, v.node_band);
  return v;
}

}  // namespace hangar::health
