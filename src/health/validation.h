// Validation verdicts: a node's benchmark results against the fleet and against absolute floors.
//
// The rule, per metric:
//   * Floor: below floor_fraction (0.75, DCGM) x the model's reference peak, when a reference is
//     configured, fails the GPU (fatal, drain). NCCL single-node bus bandwidth below 150 GB/s on
//     an NVLink node (15 GB/s PCIe-only, NVSentinel preflight) fails the node.
//   * Fleet: against the median of the latest results of every node with the same GPU model
//     (this report included): more than 5% worse (SuperBench; latencies 5% higher) is an outlier,
//     which degrades the GPU (or the node, for NCCL). The performance band is 0 within 2% of the
//     median, 1 within 5%, 2 beyond.
//   * First nodes of a model: with fewer than min_fleet_nodes (3) nodes' results the median means
//     little, so there is no fleet comparison and every band is 0; GPUs are instead compared with
//     the median of their own node's GPUs (DCGM's per-node outlier check) when at least
//     min_peer_gpus (3) were measured, and floors always apply.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "health/fault_set.h"
#include "health/inputs.h"

namespace hangar::health {

enum class Metric : uint8_t {
  kGemmTflops,
  kMemBwGbs,
  kH2dGbs,
  kD2hGbs,
  kNcclBusBwGbs,
  kNcclLatencyUs,
};
inline constexpr int kNumMetrics = 6;
std::string_view MetricName(Metric m);  // "gemm_tflops", ...
bool IsGpuMetric(Metric m);
bool LowerIsBetter(Metric m);

// A GPU model's measured peaks, per GPU; 0 = unknown (no floor).
struct ModelReference {
  std::string model;
  double gemm_tflops = 0;
  double mem_bw_gbs = 0;
  double h2d_gbs = 0;
  double d2h_gbs = 0;
};

struct ValidationPolicy {
  double outlier_fraction = 0.05;  // worse than the median by more than this: outlier
  double band0_fraction = 0.02;    // within this of the median: band 0
  int min_fleet_nodes = 3;         // nodes of a model with results before the median is used
  int min_peer_gpus = 3;           // GPUs measured on a node before peers are compared
  double floor_fraction = 0.75;    // of the reference peak
  double nccl_floor_nvlink_gbs = 150;
  double nccl_floor_pcie_gbs = 15;
  std::vector<ModelReference> references;
};

// The latest result of every node, per metric, for fleet medians. A report covering some GPUs
// replaces only those GPUs' results.
class FleetResults {
 public:
  void Record(uint32_t node, const std::string& model, const ValidationReport& r);

  struct Median {
    double value = 0;
    int nodes = 0;  // nodes that contributed
  };
  // Median of `m` over the latest results of nodes with `model` (per GPU for GPU metrics).
  // Computing it walks every node's results, and a fleet validates node after node (10,240 at
  // a controller's start), so once 64 or more nodes contribute a median is reused until
  // results for more than 1/16 as many nodes of that model have come in since: it then differs
  // from the exact one by at most that share of ranks (no outlier test hangs on that), and the
  // cost over a whole fleet's validation is O(N log N) instead of O(N^2).
  Median MedianOf(std::string_view model, Metric m) const;

 private:
  Median ExactMedianOf(std::string_view model, Metric m) const;
  struct Entry {
    bool recorded = false;
    std::string model;
    std::vector<GpuBenchmark> gpus;  // by index
    double nccl_busbw_gbs = 0;
    double nccl_latency_us = 0;
  };
  std::vector<Entry> latest_;  // by node; a vector, not maps: one of these per node of the fleet
  std::map<std::string, uint64_t, std::less<>> records_;  // Record calls, by model
  struct Cached {
    Median median;
    uint64_t at_records = 0;
  };
  mutable std::map<std::pair<std::string, int>, Cached, std::less<>> cache_;
};

struct GpuVerdict {
  uint16_t index = 0;
  int band = 0;
  std::vector<Finding> findings;  // empty: this GPU passed
};

struct ValidationVerdict {
  std::vector<GpuVerdict> gpus;        // one per GPU in the report
  std::vector<Finding> node_findings;  // empty: the node-wide part passed
  bool node_measured = false;          // the report had node-wide (NCCL) results
  int node_band = 0;                   // band of the node-wide metrics
  int band = 0;                        // worst band over the node's metrics and GPUs
  bool fleet_compared = false;         // some metric had enough nodes for a median
};

// Judges `r` for a node of `model`; `r` must already be recorded in `fleet`. `nvlink`: the node's
// GPUs talk over NVLink (chooses the NCCL floor). Findings close on the next validation.
ValidationVerdict JudgeValidation(const ValidationReport& r, std::string_view model, bool nvlink,
                                  const FleetResults& fleet, const ValidationPolicy& p);

}  // namespace hangar::health
