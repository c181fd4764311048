// TcpProxy: forwards connections from a free port on 127.0.0.1 to a target port, until Cut():
// from then on it forwards nothing either way and answers nothing (a link gone silent, as when a
// network partitions: no reset, no FIN), for the "leader cut off from PostgreSQL" test.
#pragma once

#include <atomic>
#include <mutex>
#include <thread>
#include <vector>

namespace hangar::testing {

class TcpProxy {
 public:
  explicit TcpProxy(int target_port);
  ~TcpProxy();
  TcpProxy(const TcpProxy&) = delete;
  TcpProxy& operator=(const TcpProxy&) = delete;
  int port() const { return port_; }  // 0 when it could not listen
  void Cut() { cut_ = true; }

 private:
  void Accept();
  void Pump(int from, int to);

  int target_;
  int listen_fd_ = -1;
  int port_ = 0;
  std::atomic<bool> cut_{false};
  std::atomic<bool> stop_{false};
  std::mutex mu_;
  std::vector<int> fds_;
  std::vector<std::thread> threads_;
  std::thread acceptor_;
};

}  // namespace hangar::testing
