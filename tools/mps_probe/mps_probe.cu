// hangar-mps-probe: does this process's MPS pinned device memory limit hold? Allocates under the
// limit (must succeed) and over it (must be refused), and prints one JSON line:
//   {"sm_count":132,"mps_limit_mib":40960,"total_mib":40960,"under_mib":20480,"under_ok":true,
//    "over_mib":41984,"over_refused":true,"over_error":"out of memory","verdict":"enforced"}
// The limit is read from CUDA_MPS_PINNED_DEVICE_MEM_LIMIT ("0=40960M"; the device-0 entry).
// Exit status: 0 when the limit is enforced, 1 when the over-limit allocation succeeded, 2 when
// the probe could not run (no GPU, no limit set). Used by scripts/device-check.sh.
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

namespace {

// MiB of device 0 in "0=40960M,1=..." (suffixes G, M, K or none for bytes); -1 when absent.
long long LimitMiB(const char* text) {
  if (!text) return -1;
  std::string s(text);
  size_t at = 0;
  while (at < s.size()) {
    size_t end = s.find(',', at);
    if (end == std::string::npos) end = s.size();
    const std::string entry = s.substr(at, end - at);
    at = end + 1;
    const size_t eq = entry.find('=');
    if (eq == std::string::npos || entry.substr(0, eq) != "0") continue;
    char* unit = nullptr;
    const double v = std::strtod(entry.c_str() + eq + 1, &unit);
    const char u = unit && *unit ? *unit : 'B';
    const double mib = u == 'G' || u == 'g' ? v * 1024 : u == 'M' || u == 'm' ? v : u == 'K' || u == 'k' ? v / 1024 : v / (1024.0 * 1024);
    return static_cast<long long>(mib);
  }
  return -1;
}

// Allocates `mib` MiB and touches it; "" on success, else CUDA's error text.
std::string TryAlloc(long long mib) {
  void* p = nullptr;
  cudaError_t e = cudaMalloc(&p, static_cast<size_t>(mib) << 20);
  if (e == cudaSuccess) e = cudaMemset(p, 1, static_cast<size_t>(mib) << 20);
  if (e == cudaSuccess) e = cudaDeviceSynchronize();
  if (p) cudaFree(p);
  if (e == cudaSuccess) return "";
  cudaGetLastError();  // clear it for the next try
  return cudaGetErrorString(e);
}

}  // namespace

int main() {
  const long long limit = LimitMiB(std::getenv("CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"));
  if (limit <= 0) {
    std::printf("{\"error\":\"CUDA_MPS_PINNED_DEVICE_MEM_LIMIT has no device-0 limit; run under hangar mps-check\"}\n");
    return 2;
  }
  size_t free_b = 0, total_b = 0;
  const cudaError_t init = cudaMemGetInfo(&free_b, &total_b);
  if (init != cudaSuccess) {
    std::printf("{\"error\":\"no usable GPU: %s\"}\n", cudaGetErrorString(init));
    return 2;
  }
  int sms = 0;  // with CUDA_MPS_ACTIVE_THREAD_PERCENTAGE, what the client is told it has (information only)
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
  const long long under = limit / 2, over = limit + 1024;
  const std::string under_err = TryAlloc(under);
  const std::string over_err = TryAlloc(over);
  const bool enforced = under_err.empty() && !over_err.empty();
  std::printf("{\"sm_count\":%d,\"mps_limit_mib\":%lld,\"total_mib\":%lld,\"free_mib\":%lld,\"under_mib\":%lld,\"under_ok\":%s,"
              "\"under_error\":\"%s\",\"over_mib\":%lld,\"over_refused\":%s,\"over_error\":\"%s\",\"verdict\":\"%s\"}\n",
              sms, limit, static_cast<long long>(total_b >> 20), static_cast<long long>(free_b >> 20), under,
              under_err.empty() ? "true" : "false", under_err.c_str(), over, over_err.empty() ? "false" : "true",
              over_err.c_str(), enforced ? "enforced" : over_err.empty() ? "not enforced" : "under-limit allocation failed");
  return enforced ? 0 : over_err.empty() ? 1 : 2;
}
