// hangar-validate's measurements on the GPU: cuBLAS GEMM rate, device memory bandwidth, host
// link bandwidth (pinned memory) and the NCCL all-reduce bus bandwidth.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <chrono>
#include <vector>

#include "measure.h"

#ifdef HANGAR_HAVE_CUBLAS
#include <cublas_v2.h>
#endif
#ifdef HANGAR_HAVE_NCCL
#include <nccl.h>
#endif

namespace hangar::validate {
namespace {

#define TRY(call)                                                                     \
  do {                                                                                \
    cudaError_t e_ = (call);                                                          \
    if (e_ != cudaSuccess) return std::string(#call) + ": " + cudaGetErrorString(e_); \
  } while (0)

// Device memory freed on every path out of a measurement.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  ~DeviceBuffer() {
    if (p_) cudaFree(p_);
  }
  cudaError_t Allocate(size_t bytes) { return cudaMalloc(&p_, bytes); }
  void* get() const { return p_; }

 private:
  void* p_ = nullptr;
};

class HostBuffer {
 public:
  HostBuffer() = default;
  HostBuffer(const HostBuffer&) = delete;
  HostBuffer& operator=(const HostBuffer&) = delete;
  ~HostBuffer() {
    if (p_) cudaFreeHost(p_);
  }
  cudaError_t Allocate(size_t bytes) { return cudaMallocHost(&p_, bytes); }
  void* get() const { return p_; }

 private:
  void* p_ = nullptr;
};

class Timer {
 public:
  Timer() {
    cudaEventCreate(&start_);
    cudaEventCreate(&stop_);
  }
  ~Timer() {
    cudaEventDestroy(start_);
    cudaEventDestroy(stop_);
  }
  void Start() { cudaEventRecord(start_); }
  // Seconds since Start, once the GPU has caught up.
  double Stop() {
    cudaEventRecord(stop_);
    cudaEventSynchronize(stop_);
    float ms = 0;
    cudaEventElapsedTime(&ms, start_, stop_);
    return ms / 1e3;
  }

 private:
  cudaEvent_t start_, stop_;
};

// Pseudo-random values in [-1, 1): zeros would let the tensor cores idle at a lower power draw
// and overstate the rate a real workload sees.
__global__ void FillBf16(__nv_bfloat16* p, size_t n, unsigned seed) {
  for (size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n;
       i += size_t{gridDim.x} * blockDim.x) {
    unsigned h = static_cast<unsigned>(i) * 2654435761u ^ seed;
    h ^= h >> 15;
    h *= 2246822519u;
    h ^= h >> 13;
    p[i] = __float2bfloat16(static_cast<float>(h & 0xFFFF) / 32768.0f - 1.0f);
  }
}

__global__ void Copy(const float4* __restrict__ in, float4* __restrict__ out, size_t n) {
  for (size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n;
       i += size_t{gridDim.x} * blockDim.x) {
    out[i] = in[i];
  }
}

int Blocks(int index) {
  int sms = 0;
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, index);
  return sms > 0 ? sms * 16 : 1024;
}

std::string MeasureGemm(int index, const MeasureOptions& o, double* tflops) {
#ifdef HANGAR_HAVE_CUBLAS
  const size_t n = static_cast<size_t>(o.gemm_n);
  DeviceBuffer a, b, c;
  TRY(a.Allocate(n * n * sizeof(__nv_bfloat16)));
  TRY(b.Allocate(n * n * sizeof(__nv_bfloat16)));
  TRY(c.Allocate(n * n * sizeof(__nv_bfloat16)));
  FillBf16<<<Blocks(index), 256>>>(static_cast<__nv_bfloat16*>(a.get()), n * n, 1);
  FillBf16<<<Blocks(index), 256>>>(static_cast<__nv_bfloat16*>(b.get()), n * n, 2);
  TRY(cudaGetLastError());
  cublasHandle_t handle;
  if (cublasCreate(&handle) != CUBLAS_STATUS_SUCCESS) return "cublasCreate failed";
  const float alpha = 1.0f, beta = 0.0f;
  const int m = o.gemm_n;
  auto gemm = [&] {
    return cublasGemmEx(handle, CUBLAS_OP_N, CUBLAS_OP_N, m, m, m, &alpha, a.get(), CUDA_R_16BF, m,
                        b.get(), CUDA_R_16BF, m, &beta, c.get(), CUDA_R_16BF, m, CUBLAS_COMPUTE_32F,
                        CUBLAS_GEMM_DEFAULT);
  };
  cublasStatus_t status = CUBLAS_STATUS_SUCCESS;
  for (int i = 0; i < 3 && status == CUBLAS_STATUS_SUCCESS; ++i) status = gemm();  // warm-up
  Timer t;
  t.Start();
  for (int i = 0; i < o.iterations && status == CUBLAS_STATUS_SUCCESS; ++i) status = gemm();
  const double seconds = t.Stop();
  cublasDestroy(handle);
  if (status != CUBLAS_STATUS_SUCCESS)
    return "cublasGemmEx failed with status " + std::to_string(status);
  TRY(cudaGetLastError());
  *tflops = 2.0 * n * n * n * o.iterations / seconds / 1e12;
  return "";
#else
  (void)index, (void)o, (void)tflops;
  return "";
#endif
}

std::string MeasureDeviceMemory(int index, const MeasureOptions& o, double* gbs) {
  DeviceBuffer in, out;
  TRY(in.Allocate(o.device_copy_bytes));
  TRY(out.Allocate(o.device_copy_bytes));
  TRY(cudaMemset(in.get(), 1, o.device_copy_bytes));
  const size_t n = o.device_copy_bytes / sizeof(float4);
  auto copy = [&] {
    Copy<<<Blocks(index), 256>>>(static_cast<const float4*>(in.get()),
                                 static_cast<float4*>(out.get()), n);
  };
  for (int i = 0; i < 3; ++i) copy();
  Timer t;
  t.Start();
  for (int i = 0; i < o.iterations; ++i) copy();
  const double seconds = t.Stop();
  TRY(cudaGetLastError());
  *gbs = 2.0 * o.device_copy_bytes * o.iterations / seconds / 1e9;  // each byte read and written
  return "";
}

std::string MeasureHostLink(const MeasureOptions& o, double* h2d, double* d2h) {
  HostBuffer host;
  DeviceBuffer dev;
  TRY(host.Allocate(o.host_copy_bytes));
  TRY(dev.Allocate(o.host_copy_bytes));
  for (int direction = 0; direction < 2; ++direction) {
    const bool to_device = direction == 0;
    auto copy = [&] {
      return to_device
                 ? cudaMemcpyAsync(dev.get(), host.get(), o.host_copy_bytes, cudaMemcpyHostToDevice)
                 : cudaMemcpyAsync(host.get(), dev.get(), o.host_copy_bytes,
                                   cudaMemcpyDeviceToHost);
    };
    TRY(copy());  // warm-up
    Timer t;
    t.Start();
    const int iterations = o.iterations / 2 > 0 ? o.iterations / 2 : 1;
    for (int i = 0; i < iterations; ++i) TRY(copy());
    const double seconds = t.Stop();
    (to_device ? *h2d : *d2h) = static_cast<double>(o.host_copy_bytes) * iterations / seconds / 1e9;
  }
  return "";
}

}  // namespace

bool HaveCublas() {
#ifdef HANGAR_HAVE_CUBLAS
  return true;
#else
  return false;
#endif
}

bool HaveNccl() {
#ifdef HANGAR_HAVE_NCCL
  return true;
#else
  return false;
#endif
}

std::string CountGpus(int* count, std::string* cuda_version) {
  int driver = 0;
  TRY(cudaDriverGetVersion(&driver));
  if (driver == 0) return "no NVIDIA driver is loaded on this machine";
  *cuda_version = std::to_string(driver / 1000) + "." + std::to_string(driver % 1000 / 10);
  TRY(cudaGetDeviceCount(count));
  if (*count == 0) return "the NVIDIA driver sees no GPU on this machine";
  return "";
}

std::string MeasureGpu(int index, const MeasureOptions& o, GpuFigures* out) {
  TRY(cudaSetDevice(index));
  cudaDeviceProp prop{};
  TRY(cudaGetDeviceProperties(&prop, index));
  out->model = prop.name;
  std::string error = MeasureGemm(index, o, &out->gemm_tflops);
  if (error.empty()) error = MeasureDeviceMemory(index, o, &out->mem_bw_gbs);
  if (error.empty()) error = MeasureHostLink(o, &out->h2d_gbs, &out->d2h_gbs);
  cudaDeviceSynchronize();
  return error;
}

#ifdef HANGAR_HAVE_NCCL
namespace {

// Times o.iterations all-reduces (after five warm-ups) over `comms`, one per local GPU
// 0..count-1, in a communicator of `nranks` GPUs; destroys the communicators.
std::string TimeAllReduce(std::vector<ncclComm_t>& comms, int count, int nranks,
                          const MeasureOptions& o, double* busbw_gbs) {
  const size_t elements = o.nccl_bytes / sizeof(float);
  std::vector<DeviceBuffer> buffers(static_cast<size_t>(count));
  std::vector<cudaStream_t> streams(static_cast<size_t>(count));
  std::string error;
  for (int i = 0; i < count && error.empty(); ++i) {
    cudaSetDevice(i);
    if (buffers[i].Allocate(o.nccl_bytes) != cudaSuccess ||
        cudaStreamCreate(&streams[i]) != cudaSuccess) {
      error = "cannot allocate the all-reduce buffer on GPU " + std::to_string(i);
    }
  }
  auto all_reduce = [&]() -> ncclResult_t {
    ncclGroupStart();
    for (int i = 0; i < count; ++i) {
      ncclAllReduce(buffers[i].get(), buffers[i].get(), elements, ncclFloat, ncclSum, comms[i],
                    streams[i]);
    }
    ncclResult_t r = ncclGroupEnd();
    for (int i = 0; i < count; ++i) cudaStreamSynchronize(streams[i]);
    return r;
  };
  ncclResult_t r = ncclSuccess;
  for (int i = 0; i < 5 && error.empty() && r == ncclSuccess; ++i) r = all_reduce();
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < o.iterations && error.empty() && r == ncclSuccess; ++i) r = all_reduce();
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (error.empty() && r != ncclSuccess)
    error = std::string("ncclAllReduce: ") + ncclGetErrorString(r);
  if (error.empty()) {
    // nccl-tests' definition: the algorithm bandwidth times 2(n-1)/n, comparable across sizes.
    const double algbw = static_cast<double>(o.nccl_bytes) * o.iterations / seconds / 1e9;
    *busbw_gbs = algbw * 2.0 * (nranks - 1) / nranks;
  }
  for (int i = 0; i < count; ++i) {
    if (streams[i]) cudaStreamDestroy(streams[i]);
    if (comms[i]) ncclCommDestroy(comms[i]);
  }
  return error;
}

}  // namespace
#endif

std::string MeasureAllReduce(int count, const MeasureOptions& o, double* busbw_gbs) {
#ifdef HANGAR_HAVE_NCCL
  std::vector<ncclComm_t> comms(static_cast<size_t>(count));
  if (ncclResult_t r = ncclCommInitAll(comms.data(), count, nullptr); r != ncclSuccess) {
    return std::string("ncclCommInitAll: ") + ncclGetErrorString(r);
  }
  return TimeAllReduce(comms, count, count, o, busbw_gbs);
#else
  (void)count, (void)o, (void)busbw_gbs;
  return "NCCL was not found when hangar-validate was built";
#endif
}

std::string NcclUniqueId(std::string* hex) {
#ifdef HANGAR_HAVE_NCCL
  ncclUniqueId id;
  if (ncclResult_t r = ncclGetUniqueId(&id); r != ncclSuccess)
    return std::string("ncclGetUniqueId: ") + ncclGetErrorString(r);
  static const char* kDigits = "0123456789abcdef";
  hex->clear();
  for (unsigned char c : id.internal) {
    hex->push_back(kDigits[c >> 4]);
    hex->push_back(kDigits[c & 15]);
  }
  return "";
#else
  (void)hex;
  return "NCCL was not found when hangar-validate was built";
#endif
}

std::string MeasureGangAllReduce(const std::string& id_hex, int nranks, int first_rank, int count,
                                 const MeasureOptions& o, double* busbw_gbs) {
#ifdef HANGAR_HAVE_NCCL
  ncclUniqueId id;
  if (id_hex.size() != 2 * sizeof id.internal)
    return "the NCCL id must be " + std::to_string(2 * sizeof id.internal) + " hex digits";
  auto digit = [](char c) { return c <= '9' ? c - '0' : c - 'a' + 10; };
  for (size_t i = 0; i < sizeof id.internal; ++i)
    id.internal[i] = static_cast<char>(digit(id_hex[2 * i]) * 16 + digit(id_hex[2 * i + 1]));
  if (first_rank < 0 || count < 1 || first_rank + count > nranks)
    return "ranks " + std::to_string(first_rank) + ".." + std::to_string(first_rank + count - 1) +
           " do not fit a gang of " + std::to_string(nranks) + " GPUs";
  // One communicator rank per local GPU, all joined in one group (NCCL's one-process-many-GPUs
  // form of ncclCommInitRank).
  std::vector<ncclComm_t> comms(static_cast<size_t>(count), nullptr);
  ncclGroupStart();
  for (int i = 0; i < count; ++i) {
    cudaSetDevice(i);
    ncclCommInitRank(&comms[i], nranks, id, first_rank + i);
  }
  if (ncclResult_t r = ncclGroupEnd(); r != ncclSuccess)
    return std::string("ncclCommInitRank: ") + ncclGetErrorString(r);
  return TimeAllReduce(comms, count, nranks, o, busbw_gbs);
#else
  (void)id_hex, (void)nranks, (void)first_rank, (void)count, (void)o, (void)busbw_gbs;
  return "NCCL was not found when hangar-validate was built";
#endif
}

}  // namespace hangar::validate
