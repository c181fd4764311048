// `hangar mps-check`: one command run as a fractional task of this node would be -- a client of
// its GPU's MPS control daemon, started and stopped by the agent's own code (mps.h) -- to see on a
// GPU that the limits hold (scripts/device-check.sh runs it with tools/mps_probe).
#pragma once

#include <ostream>
#include <string>
#include <vector>

#include "agent/gpu/gpu_backend.h"
#include "agent/gpu/mps.h"

namespace hangar::agent {

struct MpsCheckOptions {
  uint32_t gpu = 0;
  std::string fraction = "0.5";  // HANGAR_GPU_FRACTION
  int64_t gpu_memory_mib = 0;    // HANGAR_GPU_MEMORY_MIB; 0: the fraction of the GPU's memory
  std::vector<std::string> command;
};

// Discovers the GPUs, starts the daemon, runs the command with the client environment (and its
// output to `out`'s terminal), stops the daemon. *exit_code: the command's exit status.
Status RunMpsCheck(GpuBackend& backend, const MpsOptions& mps, const MpsCheckOptions& o,
                   std::ostream& out, int* exit_code);

}  // namespace hangar::agent
