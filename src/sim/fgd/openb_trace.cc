#include "sim/fgd/openb_trace.h"

#include <algorithm>
#include <fstream>
#include <optional>
#include <sstream>
#include <unordered_set>

#include "sim/fgd/csv_rows.h"

namespace hangar::sim::fgd {

namespace {

constexpr int kMaxGpus = 64;  // cluster::kMaxGpusPerNode

std::vector<std::string> SplitModels(std::string_view spec) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= spec.size()) {
    size_t bar = spec.find('|', start);
    if (bar == std::string_view::npos) bar = spec.size();
    if (bar > start) out.emplace_back(spec.substr(start, bar - start));
    start = bar + 1;
  }
  return out;
}

}  // namespace

StatusOr<std::vector<OpenbNode>> ParseOpenbNodes(std::string_view text, std::string_view source) {
  CsvRows rows(text, source);
  HANGAR_RETURN_IF_ERROR(rows.ReadHeader({"sn", "cpu_milli", "memory_mib", "gpu", "model"}));
  const size_t sn = *rows.Column("sn"), cpu = *rows.Column("cpu_milli"),
               mem = *rows.Column("memory_mib"), gpu = *rows.Column("gpu"),
               model = *rows.Column("model");
  std::vector<OpenbNode> nodes;
  std::unordered_set<std::string> names;
  for (;;) {
    HANGAR_ASSIGN_OR_RETURN(bool more, rows.Next());
    if (!more) break;
    OpenbNode n;
    n.line = rows.line();
    n.name = std::string(rows.Field(sn));
    if (n.name.empty()) return rows.Error("sn (the node name) is empty");
    if (!names.insert(n.name).second) return rows.Error("node '" + n.name + "' is listed twice");
    HANGAR_ASSIGN_OR_RETURN(n.milli_cpu, rows.Int(cpu, 0, INT64_MAX / 4));
    HANGAR_ASSIGN_OR_RETURN(n.memory_mib, rows.Int(mem, 0, INT64_MAX / 4));
    HANGAR_ASSIGN_OR_RETURN(int64_t g, rows.Int(gpu, 0, kMaxGpus));
    n.gpus = static_cast<int32_t>(g);
    n.model = std::string(rows.Field(model));
    if (n.gpus > 0 && n.model.empty())
      return rows.Error("node '" + n.name + "' has GPUs but no model");
    nodes.push_back(std::move(n));
  }
  if (nodes.empty()) return rows.Error("the file lists no nodes");
  return nodes;
}

StatusOr<std::vector<OpenbPod>> ParseOpenbPods(std::string_view text, std::string_view source) {
  CsvRows rows(text, source);
  HANGAR_RETURN_IF_ERROR(rows.ReadHeader({"name", "cpu_milli", "memory_mib", "num_gpu"}));
  const size_t name = *rows.Column("name"), cpu = *rows.Column("cpu_milli"),
               mem = *rows.Column("memory_mib"), num = *rows.Column("num_gpu");
  const std::optional<size_t> milli = rows.Column("gpu_milli"), spec = rows.Column("gpu_spec");
  std::vector<OpenbPod> pods;
  for (;;) {
    HANGAR_ASSIGN_OR_RETURN(bool more, rows.Next());
    if (!more) break;
    OpenbPod p;
    p.line = rows.line();
    p.name = std::string(rows.Field(name));
    if (p.name.empty()) return rows.Error("the pod name is empty");
    HANGAR_ASSIGN_OR_RETURN(p.milli_cpu, rows.Int(cpu, 0, INT64_MAX / 4));
    HANGAR_ASSIGN_OR_RETURN(p.memory_mib, rows.Int(mem, 0, INT64_MAX / 4));
    HANGAR_ASSIGN_OR_RETURN(int64_t n, rows.Int(num, 0, kMaxGpus));
    p.num_gpu = static_cast<int32_t>(n);
    p.gpu_milli = 1000;
    if (milli) {
      HANGAR_ASSIGN_OR_RETURN(int64_t m, rows.Int(*milli, INT32_MIN, INT32_MAX));
      p.gpu_milli = static_cast<int32_t>(std::clamp<int64_t>(m, 0, 1000));  // as FGD's loader
    }
    if (p.num_gpu == 0) p.gpu_milli = 0;
    if (p.num_gpu > 1 && p.gpu_milli < 1000) {
      return rows.Error("num_gpu is " + std::to_string(p.num_gpu) + " but gpu_milli is " +
                        std::to_string(p.gpu_milli) +
                        "; a pod that shares a GPU takes exactly one");
    }
    if (spec) p.gpu_spec = std::string(rows.Field(*spec));
    p.models = SplitModels(p.gpu_spec);
    pods.push_back(std::move(p));
  }
  if (pods.empty()) return rows.Error("the file lists no pods");
  return pods;
}

StatusOr<std::string> ReadTextFile(const std::string& path, std::string_view what) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return Status::NotFound("cannot read " + std::string(what) + " '" + path +
                            "'; check that the file exists and is readable");
  }
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

StatusOr<std::vector<OpenbNode>> ReadOpenbNodes(const std::string& path) {
  HANGAR_ASSIGN_OR_RETURN(std::string text, ReadTextFile(path, "the node list"));
  return ParseOpenbNodes(text, path);
}

StatusOr<std::vector<OpenbPod>> ReadOpenbPods(const std::string& path) {
  HANGAR_ASSIGN_OR_RETURN(std::string text, ReadTextFile(path, "the pod list"));
  return ParseOpenbPods(text, path);
}

}  // namespace hangar::sim::fgd
