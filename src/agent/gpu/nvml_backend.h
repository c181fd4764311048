// The NVML backend: real GPUs through libnvidia-ml.so.1, loaded at run time so one hangar binary
// runs on machines with and without NVIDIA GPUs. Xids come from NVML's event set and from the
// kernel log (kernel_log_xid.h); a GPU answering GPU_IS_LOST is sampled as `lost`, the others as
// usual. Validate() runs hangar-validate (tools/validate/).
#pragma once

#include <memory>
#include <string>

#include "agent/gpu/gpu_backend.h"
#include "common/time.h"

namespace hangar::agent {

struct NvmlOptions {
  std::string library = "libnvidia-ml.so.1";      // a test points this at tests/nvml_double/
  std::string kernel_log = "/dev/kmsg";           // "" reads no kernel log
  std::string pci_root = "/sys/bus/pci/devices";  // NUMA nodes when NVML has no answer
  std::string validate_program;                   // "" finds hangar-validate (validate_program.h)
  std::string scratch_dir = "/tmp";               // hangar-validate's output files
  Duration validate_timeout = 10 * kMinute;
};

// Loads NVML, initialises it and finds the GPUs' handles. Unavailable when there is no NVML or
// no driver ("cannot load libnvidia-ml.so.1 ..."); FailedPrecondition naming the symbol when a
// required function is missing.
StatusOr<std::unique_ptr<GpuBackend>> MakeNvmlBackend(const NvmlOptions& options);

}  // namespace hangar::agent
