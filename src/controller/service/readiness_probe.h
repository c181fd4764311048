// Readiness probes, run by the controller (docs/services.md says why there): an HTTP GET that must
// answer 2xx or 3xx, or a TCP connection that must be accepted, each within the probe's timeout.
#pragma once

#include <string>

#include "controller/service/service_spec.h"

namespace hangar::controller::service {

struct ProbeResult {
  bool passed = false;
  std::string detail;  // why it failed: "connection refused", "HTTP 503", "timed out"
};

ProbeResult RunProbe(const std::string& address, int port, const ProbeSpec& probe);

}  // namespace hangar::controller::service
