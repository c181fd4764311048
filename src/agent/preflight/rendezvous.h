// The gang preflight's rendezvous (gang_preflight.h): a small key-value store that rank 0 serves
// to the gang over TCP, and its clients. A frame is an op (set or get), a key and a value; keys
// are set once. A client that loses its server connects again and sets again what it had set, so
// a rank that first reached an earlier server (one going away) still meets the others.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "common/status.h"

namespace hangar::agent::preflight {

// "host:port", or "[v6]:port".
std::string HostPort(const std::string& host, int port);

// The rendezvous: a key-value store rank 0 serves to the gang over TCP. Keys are set once; a get
// waits for its key. The server runs on its own thread until destroyed.
class RendezvousServer {
 public:
  // Listens on host:port (SO_REUSEADDR). Unavailable when it cannot.
  static StatusOr<std::unique_ptr<RendezvousServer>> Listen(const std::string& host, int port);
  ~RendezvousServer();

 private:
  RendezvousServer() = default;
  void Serve();
  int listen_fd_ = -1;
  int wake_[2] = {-1, -1};
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

class RendezvousClient {
 public:
  // Connects, retrying until `deadline` (rank 0 may start its server after the others start).
  // When the connection breaks later (the server it reached was an earlier one, going), it
  // connects again until `deadline` and sets again what it had set.
  static StatusOr<std::unique_ptr<RendezvousClient>> Connect(
      const std::string& host, int port, std::chrono::steady_clock::time_point deadline);
  ~RendezvousClient();
  Status Set(const std::string& key, const std::string& value);
  // The value, or NotFound once `deadline` passes without it.
  StatusOr<std::string> Get(const std::string& key, std::chrono::steady_clock::time_point deadline);
  // Whether the key is set now.
  StatusOr<bool> Has(const std::string& key);

 private:
  RendezvousClient(int fd, std::string host, int port,
                   std::chrono::steady_clock::time_point deadline)
      : fd_(fd), host_(std::move(host)), port_(port), deadline_(deadline) {}
  static StatusOr<int> Dial(const std::string& host, int port,
                            std::chrono::steady_clock::time_point deadline);
  StatusOr<std::string> Ask(char op, const std::string& key, const std::string& value);
  StatusOr<std::string> AskOnce(char op, const std::string& key, const std::string& value);
  int fd_ = -1;
  std::string host_;
  int port_ = 0;
  std::chrono::steady_clock::time_point deadline_;
  std::vector<std::pair<std::string, std::string>> sets_;  // replayed after a reconnect
};

}  // namespace hangar::agent::preflight
