// `hangar gpu-check`: what the agent would report about this machine's GPUs -- discovery, one
// telemetry sample and, if asked, validation -- as tables a person reads.
#pragma once

#include <ostream>

#include "agent/gpu/gpu_backend.h"
#include "common/time.h"

namespace hangar::agent {

// Prints the tables to `out`. Fails when discovery or sampling fails, when there are no GPUs,
// and (with `validate`) when validation cannot run; what was learnt before is printed first.
Status RunGpuCheck(GpuBackend& backend, bool validate, Time now, std::ostream& out);

}  // namespace hangar::agent
