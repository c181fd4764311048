// hangar-validate: measures this machine's GPUs and prints one JSON object:
//   {"gpus": [{"index": 0, "model": "...", "gemm_tflops": .., "mem_bw_gbs": .., "h2d_gbs": ..,
//              "d2h_gbs": ..}],          (a GPU that failed has "error" instead of some figures)
//    "nccl_busbw_gbs": ..,               (or "nccl": "not built" | "single GPU" | "failed: ...")
//    "driver": "570.86.15", "cuda": "12.8"}
// Exits 0 when it measured (even a GPU that failed: that is a result); with no usable GPU it
// prints {"error": "..."} and exits 1. The agent runs it when the controller asks to validate.
//
// The gang preflight (docs/goodput.md) runs two more forms, one process per task of a gang:
//   hangar-validate --nccl-id                  -> {"nccl_id": "<hex>"}            (rank 0)
//   hangar-validate --nccl-gang HEX --nranks N --first-rank R [--nccl-mib M]
//                                              -> {"nccl_gang_busbw_gbs": .., "gpus": .., "nranks":
//                                              ..}
// the second joining this process's GPUs (CUDA_VISIBLE_DEVICES) to an all-reduce across the gang.
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

struct Args {
  MeasureOptions measure;
  bool nccl_id = false;
  std::string nccl_gang;  // the id, hex
  int nranks = 0;
  int first_rank = -1;
};

bool ParseArgs(int argc, char** argv, Args& a) {
  MeasureOptions& o = a.measure;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const bool has_value = i + 1 < argc;
    if (arg == "--gemm-size" && has_value) {
      o.gemm_n = std::atoi(argv[++i]);
    } else if (arg == "--iterations" && has_value) {
      o.iterations = std::atoi(argv[++i]);
    } else if (arg == "--nccl-id") {
      a.nccl_id = true;
    } else if (arg == "--nccl-gang" && has_value) {
      a.nccl_gang = argv[++i];
    } else if (arg == "--nranks" && has_value) {
      a.nranks = std::atoi(argv[++i]);
    } else if (arg == "--first-rank" && has_value) {
      a.first_rank = std::atoi(argv[++i]);
    } else if (arg == "--nccl-mib" && has_value) {
      o.nccl_bytes = static_cast<size_t>(std::atoi(argv[++i])) << 20;
    } else {
      std::cerr << "usage: hangar-validate [--gemm-size N (8192)] [--iterations N (20)]\n"
                   "       hangar-validate --nccl-id\n"
                   "       hangar-validate --nccl-gang HEX --nranks N --first-rank R "
                   "[--nccl-mib M (256)] [--iterations N]\n";
      return false;
    }
  }
  if (!a.nccl_gang.empty() && (a.nranks < 1 || a.first_rank < 0 || o.nccl_bytes == 0)) {
    std::cerr << "hangar-validate: --nccl-gang needs --nranks and --first-rank\n";
    return false;
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
  using nlohmann::json;
  hangar::validate::Args args;
  if (!hangar::validate::ParseArgs(argc, argv, args)) return 2;
  const hangar::validate::MeasureOptions& options = args.measure;
  if (args.nccl_id) {
    std::string hex;
    const std::string error = hangar::validate::NcclUniqueId(&hex);
    std::cout << (error.empty() ? json{{"nccl_id", hex}} : json{{"error", error}}).dump() << "\n";
    return error.empty() ? 0 : 1;
  }
  int count = 0;
  std::string cuda;
  if (std::string error = hangar::validate::CountGpus(&count, &cuda); !error.empty()) {
    std::cout << json{{"error", "no usable GPU: " + error}}.dump() << "\n";
    return 1;
  }
  if (!args.nccl_gang.empty()) {
    double busbw = 0;
    const std::string error = hangar::validate::MeasureGangAllReduce(
        args.nccl_gang, args.nranks, args.first_rank, count, options, &busbw);
    std::cout << (error.empty() ? json{{"nccl_gang_busbw_gbs", busbw},
                                       {"gpus", count},
                                       {"nranks", args.nranks}}
                                : json{{"error", error}})
                     .dump()
              << "\n";
    return error.empty() ? 0 : 1;
  }
  nlohmann::json out = hangar::validate::MeasureAll(count, options);
  out["driver"] = hangar::validate::KernelDriverVersion();
  out["cuda"] = cuda;
  std::cout << out.dump() << "\n";
  return 0;
}
