// Readers for the Alibaba openb trace (cluster-trace-gpu-v2023): the GPU node list and a pod
// list, as FGD's simulator reads them. Columns are found by their header names, so the
// multigpu files (five columns only) and the full ones read the same way.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace hangar::sim::fgd {

struct OpenbNode {
  std::string name;  // `sn`
  int64_t milli_cpu = 0;
  int64_t memory_mib = 0;
  int32_t gpus = 0;
  std::string model;
  int line = 0;
};

struct OpenbPod {
  std::string name;
  int64_t milli_cpu = 0;
  int64_t memory_mib = 0;
  int32_t num_gpu = 0;
  int32_t gpu_milli = 0;            // per GPU, clamped to 0..1000; 1000 when the column is absent
  std::string gpu_spec;             // as written, e.g. "V100M16|V100M32"; empty: any model
  std::vector<std::string> models;  // gpu_spec split on '|', empty parts dropped
  int line = 0;

  bool NeedsGpu() const { return num_gpu > 0 && gpu_milli > 0; }
  int64_t TotalMilliGpu() const { return int64_t{num_gpu} * gpu_milli; }
};

// Parse `text` (the whole file); `source` names it in errors ("nodes.csv:12: ..."). Fail on a
// missing column, a short row, a value that is not a whole number or is out of range, a
// duplicate node name, or a pod that shares a GPU (gpu_milli < 1000) but asks for several.
StatusOr<std::vector<OpenbNode>> ParseOpenbNodes(std::string_view text, std::string_view source);
StatusOr<std::vector<OpenbPod>> ParseOpenbPods(std::string_view text, std::string_view source);

// Read and parse a file; NotFound when it cannot be read.
StatusOr<std::vector<OpenbNode>> ReadOpenbNodes(const std::string& path);
StatusOr<std::vector<OpenbPod>> ReadOpenbPods(const std::string& path);

// Reads a whole file (shared with the reference reader).
StatusOr<std::string> ReadTextFile(const std::string& path, std::string_view what);

}  // namespace hangar::sim::fgd
