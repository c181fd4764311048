#include "common/net.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

namespace hangar {
namespace {

int BindProbe(const std::string& host, int port, int* bound_port) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  // SO_REUSEADDR as the servers themselves bind (ExclusiveServerSocketOptions): connections in
  // TIME_WAIT from a server that just stopped do not make its port look taken, while a live
  // listener still does.
  int yes = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  if (inet_pton(AF_INET, host == "localhost" ? "127.0.0.1" : host.c_str(), &a.sin_addr) != 1 ||
      bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    close(fd);
    return -1;
  }
  socklen_t len = sizeof a;
  getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  *bound_port = ntohs(a.sin_port);
  close(fd);
  return 0;
}

}  // namespace

bool PortIsFree(const std::string& host, int port) {
  int bound = 0;
  return BindProbe(host, port, &bound) == 0;
}

int PickFreePort(const std::string& host) {
  int bound = 0;
  return BindProbe(host, 0, &bound) == 0 ? bound : 0;
}

void ExclusiveServerSocketOptions(int fd) {
  int yes = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
}

}  // namespace hangar
