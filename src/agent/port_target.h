// Where a port forward (`hangar port-forward`) may connect on a node: to a TCP port on the
// loopback (or all addresses) of a task's network namespace, and only when one of the task's own
// processes holds the listening socket -- never to another user's server on the node, nor to the
// node's daemons. "The task's own" is the process tree under the task's leader (and, for a
// container task, under the container's first process): the listening socket's inode must be
// among the descriptors of one of them.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"

namespace hangar::agent {

// A listening TCP socket read from /proc/PID/net/tcp or tcp6.
struct TcpListener {
  uint64_t inode = 0;
  bool v6 = false;
  bool loopback = false;  // bound to 127.0.0.0/8, ::1 or ::ffff:127.x (else all addresses)
  bool any = false;       // bound to 0.0.0.0 or ::
};

// The listeners on `port` in the text of a /proc/net/tcp (v6 false) or tcp6 (v6 true) file.
std::vector<TcpListener> ParseTcpListeners(const std::string& text, bool v6, uint16_t port);

// The processes under `roots` (the roots too), from the parent links in `proc`/PID/stat.
std::vector<pid_t> ProcessTree(const std::vector<pid_t>& roots, const std::string& proc = "/proc");

struct PortTarget {
  bool v6 = false;  // connect to [::1] (the only listener is an IPv6 one)
};

// Whether one of the processes under `roots` listens on `port` reachable from the loopback of the
// network namespace of `netns_pid`. FailedPrecondition, naming the port, when none does (whether
// or not someone else does: that is none of the caller's business).
StatusOr<PortTarget> FindTaskListener(pid_t netns_pid, const std::vector<pid_t>& roots,
                                      uint16_t port, const std::string& proc = "/proc");

// A connected, non-blocking, close-on-exec socket to the loopback's `port` inside the network
// namespace of `netns_pid` (entered on a short-lived thread of its own when it is not this
// process's). Unavailable, saying why, when the connection fails.
StatusOr<int> ConnectInNamespace(pid_t netns_pid, const PortTarget& target, uint16_t port,
                                 const std::string& proc = "/proc");

}  // namespace hangar::agent
