// Readiness probes, run by the controller (docs/services.md says why there): an HTTP GET that must
// answer 2xx or 3xx, or a TCP connection that must be accepted, each within the probe's timeout.
#pragma once

#include <string>

#include "controller/service/service_spec.h"

namespace hangar::controller::service {

struct ProbeResult {
  bool passed = false;
  std::string detail;  // why it failed: "connection refused", "HTTP 503", "timed out"
  // The probe could not be run at all (a command probe whose node's agent did not answer): it
  // says nothing about the replica, and counts neither way.
  bool unknown = false;
};

ProbeResult RunProbe(const std::string& address, int port, const ProbeSpec& probe);

}  // namespace hangar::controller::service
