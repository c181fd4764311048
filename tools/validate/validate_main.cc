// hangar-validate: measures this machine's GPUs and prints one JSON object:
//   {"gpus": [{"index": 0, "model": "...", "gemm_tflops": .., "mem_bw_gbs": .., "h2d_gbs": ..,
//              "d2h_gbs": ..}],          (a GPU that failed has "error" instead of some figures)
//    "nccl_busbw_gbs": ..,               (or "nccl": "not built" | "single GPU" | "failed: ...")
//    "driver": "570.86.15", "cuda": "12.8"}
// Exits 0 when it measured (even a GPU that failed: that is a result); with no usable GPU it
// prints {"error": "..."} and exits 1. The agent runs it when the controller asks to validate.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "measure.h"

namespace hangar::validate {
namespace {

// "570.86.15" from the kernel module's banner; "" when there is none.
std::string KernelDriverVersion() {
  std::ifstream in("/proc/driver/nvidia/version");
  std::string line;
  std::getline(in, line);
  const size_t module = line.find("Kernel Module");
  if (module == std::string::npos) return "";
  std::istringstream words(line.substr(module + 13));
  std::string version;
  words >> version;
  return version;
}

bool ParseArgs(int argc, char** argv, MeasureOptions& o) {
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const bool has_value = i + 1 < argc;
    if (arg == "--gemm-size" && has_value) {
      o.gemm_n = std::atoi(argv[++i]);
    } else if (arg == "--iterations" && has_value) {
      o.iterations = std::atoi(argv[++i]);
    } else {
      std::cerr << "usage: hangar-validate [--gemm-size N (8192)] [--iterations N (20)]\n";
      return false;
    }
  }
  return o.gemm_n >= 256 && o.iterations >= 1;
}

nlohmann::json MeasureAll(int count, const MeasureOptions& o) {
  nlohmann::json gpus = nlohmann::json::array();
  bool all_ok = true;
  for (int i = 0; i < count; ++i) {
    GpuFigures f;
    const std::string error = MeasureGpu(i, o, &f);
    nlohmann::json g = {{"index", i}, {"model", f.model}};
    if (f.gemm_tflops >= 0)
      g["gemm_tflops"] = f.gemm_tflops;
    else if (!HaveCublas())
      g["gemm"] = "not built";
    if (f.mem_bw_gbs >= 0) g["mem_bw_gbs"] = f.mem_bw_gbs;
    if (f.h2d_gbs >= 0) g["h2d_gbs"] = f.h2d_gbs;
    if (f.d2h_gbs >= 0) g["d2h_gbs"] = f.d2h_gbs;
    if (!error.empty()) g["error"] = error;
    all_ok = all_ok && error.empty();
    gpus.push_back(g);
  }
  nlohmann::json out = {{"gpus", gpus}};
  double busbw = 0;
  if (!HaveNccl()) {
    out["nccl"] = "not built";
  } else if (count < 2) {
    out["nccl"] = "single GPU";
  } else if (!all_ok) {
    out["nccl"] = "skipped: a GPU failed its own measurements";
  } else if (std::string error = MeasureAllReduce(count, o, &busbw); !error.empty()) {
    out["nccl"] = "failed: " + error;
  } else {
    out["nccl_busbw_gbs"] = busbw;
  }
  return out;
}

}  // namespace
}  // namespace hangar::validate

int main(int argc, char** argv) {
  hangar::validate::MeasureOptions options;
  if (!hangar::validate::ParseArgs(argc, argv, options)) return 2;
  int count = 0;
  std::string cuda;
  if (std::string error = hangar::validate::CountGpus(&count, &cuda); !error.empty()) {
    std::cout << nlohmann::json{{"error", "no usable GPU: " + error}}.dump() << "\n";
    return 1;
  }
  nlohmann::json out = hangar::validate::MeasureAll(count, options);
  out["driver"] = hangar::validate::KernelDriverVersion();
  out["cuda"] = cuda;
  std::cout << out.dump() << "\n";
  return 0;
}
