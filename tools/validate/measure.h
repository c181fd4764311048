// The measurements hangar-validate makes, behind a plain C++ interface so the CUDA code
// (measure.cu) stays apart from the JSON and the command line (validate_main.cc). Every function
// returns "" on success or a sentence saying what failed.
#pragma once

#include <cstddef>
#include <string>

namespace hangar::validate {

struct MeasureOptions {
  int gemm_n = 8192;    // square bf16 GEMM, fp32 accumulate
  int iterations = 20;  // timed, after warm-up
  size_t device_copy_bytes = size_t{1} << 30;
  size_t host_copy_bytes = size_t{256} << 20;
  size_t nccl_bytes = size_t{256} << 20;  // NVSentinel's single-node preflight size
};

struct GpuFigures {
  std::string model;
  double gemm_tflops = -1;  // -1: not measured
  double mem_bw_gbs = -1;   // device memory, read + write, GB/s (1e9)
  double h2d_gbs = -1;      // pinned host to device
  double d2h_gbs = -1;
};

bool HaveCublas();
bool HaveNccl();

// The number of CUDA devices and the CUDA driver API version ("12.8").
std::string CountGpus(int* count, std::string* cuda_version);

// Measures one GPU. Fills what it could before a failure.
std::string MeasureGpu(int index, const MeasureOptions& options, GpuFigures* out);

// NCCL all-reduce bus bandwidth across GPUs 0..count-1 in this process, GB/s.
std::string MeasureAllReduce(int count, const MeasureOptions& options, double* busbw_gbs);

// The gang preflight's NCCL all-reduce (docs/goodput.md): rank 0's process makes the id
// (NcclUniqueId, as hex) and the gang shares it; each process then joins its GPUs 0..count-1 as
// ranks first_rank.. of a communicator of nranks GPUs and times the all-reduce across all of them.
std::string NcclUniqueId(std::string* hex);
std::string MeasureGangAllReduce(const std::string& id_hex, int nranks, int first_rank, int count,
                                 const MeasureOptions& options, double* busbw_gbs);

}  // namespace hangar::validate
