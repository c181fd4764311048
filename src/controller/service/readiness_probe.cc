#include "controller/service/readiness_probe.h"

#include <fcntl.h>
#include <httplib.h>
#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace hangar::controller::service {
namespace {

// Whether a TCP connection to address:port is accepted within `timeout`.
ProbeResult Connects(const std::string& address, int port, Duration timeout) {
  addrinfo hints{}, *res = nullptr;
  hints.ai_socktype = SOCK_STREAM;
  if (getaddrinfo(address.c_str(), std::to_string(port).c_str(), &hints, &res) != 0 || !res) {
    return {false, "cannot resolve " + address};
  }
  const int fd = socket(res->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  ProbeResult out{false, "cannot make a socket"};
  if (fd >= 0) {
    int rc = connect(fd, res->ai_addr, res->ai_addrlen);
    if (rc != 0 && errno == EINPROGRESS) {
      pollfd p{fd, POLLOUT, 0};
      rc = poll(&p, 1, static_cast<int>(timeout)) == 1 ? 0 : -1;
      int err = rc == 0 ? 0 : ETIMEDOUT;
      socklen_t len = sizeof err;
      if (rc == 0) getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
      errno = err;
      rc = err == 0 ? 0 : -1;
    }
    out = rc == 0 ? ProbeResult{true, ""} : ProbeResult{false, std::strerror(errno)};
    close(fd);
  }
  freeaddrinfo(res);
  return out;
}

}  // namespace

ProbeResult RunProbe(const std::string& address, int port, const ProbeSpec& probe) {
  if (probe.kind == ProbeSpec::Kind::kTcp) return Connects(address, port, probe.timeout);
  const std::string host = address.find(':') != std::string::npos ? "[" + address + "]" : address;
  httplib::Client c("http://" + host + ":" + std::to_string(port));
  const time_t sec = probe.timeout / 1000;
  const time_t usec = (probe.timeout % 1000) * 1000;
  c.set_connection_timeout(sec, usec);
  c.set_read_timeout(sec, usec);
  c.set_write_timeout(sec, usec);
  auto r = c.Get(probe.path);
  if (!r) return {false, httplib::to_string(r.error())};
  if (r->status >= 200 && r->status < 400) return {true, ""};
  return {false, "HTTP " + std::to_string(r->status) + " on " + probe.path};
}

}  // namespace hangar::controller::service
