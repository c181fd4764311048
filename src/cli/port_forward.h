// `hangar port-forward JOB[.TASK] [LOCAL:]REMOTE` (docs/interactive.md): a local TCP port whose
// every connection becomes one session (session_client.h) to 127.0.0.1:REMOTE in the task's
// network namespace, through the controller's session port and the node's agent channel, with the
// token and rules of every session. Connections run at once, each on its own gRPC stream.
#pragma once

#include <cstdint>
#include <string>

#include "common/status.h"

namespace hangar::cli {

struct PortForwardOptions {
  std::string server;  // as --server
  uint64_t job = 0;
  uint32_t task = 0;
  uint16_t local = 0;  // 0: a free port, printed
  uint16_t remote = 0;
  std::string address = "127.0.0.1";  // where the local port listens
};

// "8888" (the same port both sides) or "LOCAL:REMOTE" (LOCAL 0: any free port).
Status ParsePortPair(const std::string& text, uint16_t* local, uint16_t* remote);

// First checks that the session may open (the controller's answer: 403 for another's job, ...;
// fails then) and warns when nothing of the task listens yet; then forwards until SIGINT or
// SIGTERM. Prints "Forwarding from ADDRESS:PORT ..." on stdout once the local port listens.
Status RunPortForward(const PortForwardOptions& options);

}  // namespace hangar::cli
