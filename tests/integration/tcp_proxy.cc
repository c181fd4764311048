#include "tcp_proxy.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

namespace hangar::testing {

TcpProxy::TcpProxy(int target_port) : target_(target_port) {
  listen_fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  if (::bind(listen_fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
      ::listen(listen_fd_, 64) != 0 ||
      ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
    return;
  }
  port_ = ntohs(a.sin_port);
  acceptor_ = std::thread([this] { Accept(); });
}

TcpProxy::~TcpProxy() {
  stop_ = true;
  if (acceptor_.joinable()) acceptor_.join();
  for (auto& t : threads_) t.join();
  for (int fd : fds_) ::close(fd);
  if (listen_fd_ >= 0) ::close(listen_fd_);
}

void TcpProxy::Accept() {
  while (!stop_) {
    pollfd p{listen_fd_, POLLIN, 0};
    if (::poll(&p, 1, 50) <= 0) continue;
    const int in = ::accept(listen_fd_, nullptr, nullptr);
    if (in < 0) continue;
    const int out = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons(static_cast<uint16_t>(target_));
    std::lock_guard<std::mutex> l(mu_);
    fds_.push_back(in);
    fds_.push_back(out);
    if (cut_ || ::connect(out, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0)
      continue;  // held, silent
    threads_.emplace_back([this, in, out] { Pump(in, out); });
    threads_.emplace_back([this, in, out] { Pump(out, in); });
  }
}

// Copies `from` to `to` until either ends or the proxy stops; after Cut, nothing moves.
void TcpProxy::Pump(int from, int to) {
  char buf[16384];
  while (!stop_) {
    if (cut_) {
      ::usleep(50'000);
      continue;
    }
    pollfd p{from, POLLIN, 0};
    if (::poll(&p, 1, 50) <= 0) continue;
    if (cut_) continue;
    const ssize_t n = ::read(from, buf, sizeof buf);
    if (n <= 0) {
      ::shutdown(to, SHUT_WR);
      return;
    }
    for (ssize_t off = 0; off < n;) {
      const ssize_t w = ::write(to, buf + off, static_cast<size_t>(n - off));
      if (w <= 0) return;
      off += w;
    }
  }
}

}  // namespace hangar::testing
