// AgentListener: the agent channel's listening socket, accepted by the controller itself and each
// connection handed to gRPC (an external connection acceptor), because gRPC 1.51's own acceptor
// stops for good after one failed accept4 (a flood that exhausted the process's descriptors left
// it deaf to agents until a restart; grpc/grpc#20418). This one
//   - never stops: when accept4 fails for want of a descriptor it frees its reserve descriptor,
//     takes the waiting connection and closes it at once, so the backlog drains and the next
//     connection is taken as soon as descriptors are free again;
//   - caps the connections it has handed to gRPC and still open (max_connections): one more is
//     closed at once, so a flood cannot use up the descriptors the API, the store and the
//     agents already connected need. Idle sockets are closed by gRPC after the handshake timeout.
// Thread-safe; one thread of its own accepts.
#pragma once

#include <grpcpp/server_builder.h>

#include <atomic>
#include <map>
#include <memory>
#include <string>
#include <thread>

#include "common/mutex.h"
#include "common/status.h"

namespace hangar::controller {

class AgentListener {
 public:
  struct Options {
    int max_connections = 16384;  // open connections handed to gRPC; more are closed at once
  };
  struct Counts {
    int64_t accepted = 0;   // handed to gRPC
    int64_t shed = 0;       // closed at once: over max_connections
    int64_t exhausted = 0;  // closed at once: no descriptor was free (taken with the reserve)
    int64_t open = 0;       // handed to gRPC and still open (as of the last look)
  };

  // Binds and listens on host:port (port 0: any free port). Fails with a sentence when the
  // address cannot be had.
  static StatusOr<std::unique_ptr<AgentListener>> Listen(const std::string& host, int port,
                                                         Options options);
  ~AgentListener();  // stops

  int port() const { return port_; }
  // Hands every connection to `acceptor` from now on (the server must have started).
  void Start(std::unique_ptr<grpc::experimental::ExternalConnectionAcceptor> acceptor);
  // Stops accepting (before the server shuts down: gRPC drops what it is handed afterwards without
  // closing it). Connections already handed over stay gRPC's.
  void Stop();
  Counts counts() const HANGAR_EXCLUDES(mu_);

  // The default cap for a process whose descriptors are limited to `nofile`: what is left after
  // `reserved` for everything else (the API's connections, the store, logs), at least 64.
  static int DefaultMaxConnections(int64_t nofile, int64_t reserved);

 private:
  AgentListener(int fd, int port, Options options);
  void Loop();
  // Takes and drops one waiting connection with the reserve descriptor; false when even that
  // failed.
  bool DropOneWithReserve() HANGAR_EXCLUDES(mu_);
  void Hand(int fd) HANGAR_EXCLUDES(mu_);
  // Forgets connections gRPC has closed (their descriptor gone, or now another file).
  void Sweep() HANGAR_EXCLUDES(mu_);

  const int fd_;
  const int port_;
  const Options options_;
  int reserve_ = -1;  // /dev/null, closed to make room for one accept when descriptors run out
  int wake_[2] = {-1, -1};
  std::unique_ptr<grpc::experimental::ExternalConnectionAcceptor> acceptor_;
  std::thread thread_;
  std::atomic<bool> stop_{false};
  std::map<int, uint64_t> handed_;  // descriptor -> socket inode; the accept thread's only
  int64_t last_sweep_ns_ = 0;
  int64_t last_shed_warning_ns_ = 0;
  mutable Mutex mu_;
  Counts counts_ HANGAR_GUARDED_BY(mu_);
};

}  // namespace hangar::controller
