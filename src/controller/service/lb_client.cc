#include "controller/service/lb_client.h"

#include <netdb.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>

#include "controller/service/haproxy_config.h"

namespace hangar::controller::service {
namespace {

constexpr int kTimeoutSeconds = 2;

int Connect(const std::string& admin) {
  int fd = -1;
  if (admin.rfind("unix:", 0) == 0) {
    const std::string path = admin.substr(5);
    sockaddr_un a{};
    if (path.size() >= sizeof a.sun_path) return -1;
    a.sun_family = AF_UNIX;
    std::memcpy(a.sun_path, path.data(), path.size());
    fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return -1;
    timeval tv{kTimeoutSeconds, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    if (connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
      close(fd);
      return -1;
    }
    return fd;
  }
  const size_t colon = admin.rfind(':');
  if (colon == std::string::npos) return -1;
  addrinfo hints{}, *res = nullptr;
  hints.ai_socktype = SOCK_STREAM;
  if (getaddrinfo(admin.substr(0, colon).c_str(), admin.substr(colon + 1).c_str(), &hints, &res) !=
      0)
    return -1;
  for (addrinfo* p = res; p && fd < 0; p = p->ai_next) {
    fd = socket(p->ai_family, p->ai_socktype | SOCK_CLOEXEC, p->ai_protocol);
    if (fd < 0) continue;
    timeval tv{kTimeoutSeconds, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    if (connect(fd, p->ai_addr, p->ai_addrlen) != 0) {
      close(fd);
      fd = -1;
    }
  }
  freeaddrinfo(res);
  return fd;
}

// HAProxy answers a command it carried out with nothing or a note; these begin its refusals.
bool Refused(const std::string& answer) {
  for (const char* word : {"No such", "Unknown", "Require", "Invalid", "Permission denied",
                           "unknown", "invalid", "Can't", "cannot"}) {
    if (answer.find(word) != std::string::npos) return true;
  }
  return false;
}

}  // namespace

std::string NumericAddress(const std::string& host) {
  addrinfo hints{}, *res = nullptr;
  hints.ai_socktype = SOCK_STREAM;
  if (getaddrinfo(host.c_str(), nullptr, &hints, &res) != 0 || !res) return "";
  char buf[NI_MAXHOST] = {};
  const int rc =
      getnameinfo(res->ai_addr, res->ai_addrlen, buf, sizeof buf, nullptr, 0, NI_NUMERICHOST);
  freeaddrinfo(res);
  return rc == 0 ? buf : "";
}

StatusOr<std::string> LbClient::Run(const std::string& command) const {
  const int fd = Connect(admin_);
  if (fd < 0) {
    return Status::Unavailable("the services' load balancer does not answer on " + admin_ + " (" +
                               std::strerror(errno) +
                               "); is HAProxy running with that stats socket?");
  }
  const std::string line = command + "\n";
  bool sent =
      ::send(fd, line.data(), line.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(line.size());
  std::string answer;
  char buf[65536];
  for (ssize_t n; sent && (n = ::recv(fd, buf, sizeof buf, 0)) > 0;)
    answer.append(buf, static_cast<size_t>(n));
  close(fd);
  if (!sent)
    return Status::Unavailable("could not send '" + command + "' to the load balancer at " +
                               admin_);
  if (Refused(answer)) {
    while (!answer.empty() && (answer.back() == '\n' || answer.back() == ' ')) answer.pop_back();
    return Status::FailedPrecondition("the load balancer refused '" + command + "': " + answer);
  }
  return answer;
}

Status LbClient::Apply(const LbChange& change) const {
  LbChange c = change;
  if (c.op == LbChange::Op::kEnable) {
    c.address = NumericAddress(change.address);
    if (c.address.empty()) {
      return Status::FailedPrecondition(
          "cannot resolve replica address '" + change.address +
          "' for the load balancer; give agents --address with an IP");
    }
  }
  for (const auto& cmd : HaproxyCommands(c)) HANGAR_RETURN_IF_ERROR(Run(cmd).status());
  return Status::Ok();
}

}  // namespace hangar::controller::service
