#include "common/unix_socket.h"

#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include "common/time.h"

namespace hangar::unix_socket {

namespace {

uint64_t Fnv1a(const std::string& text) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : text) h = (h ^ c) * 1099511628211ull;
  return h;
}

std::string ErrnoText(int error) { return std::strerror(error); }

StatusOr<sockaddr_un> Address(const std::string& path) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (path.empty() || path.size() >= sizeof addr.sun_path) {
    return Status::InvalidArgument("socket path '" + path + "' is empty or longer than " +
                                   std::to_string(sizeof addr.sun_path - 1) + " bytes");
  }
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  return addr;
}

// Milliseconds poll() waits: until `deadline`, at least 0; -1 (forever) without one.
int PollMillis(int64_t deadline) {
  if (deadline == kNoDeadline) return -1;
  const int64_t left = (deadline - MonotonicNanos()) / 1000000;
  return static_cast<int>(std::clamp<int64_t>(left, 0, 1 << 30));
}

}  // namespace

Fd::~Fd() {
  if (fd_ >= 0) close(fd_);
}

std::string FitPath(const std::string& wanted, const std::string& key, const std::string& prefix) {
  if (wanted.size() < sizeof(sockaddr_un{}.sun_path)) return wanted;
  char hash[17];
  std::snprintf(hash, sizeof hash, "%016llx", static_cast<unsigned long long>(Fnv1a(key)));
  return "/tmp/" + prefix + "-" + std::to_string(getuid()) + "-" + hash + ".sock";
}

std::string StepSocketPath(const std::string& agent_socket) {
  std::string base = agent_socket;
  if (base.size() > 5 && base.compare(base.size() - 5, 5, ".sock") == 0)
    base.resize(base.size() - 5);
  return FitPath(base + ".steps.sock", agent_socket, "hangar-steps");
}

StatusOr<int> Listen(const std::string& path) {
  HANGAR_ASSIGN_OR_RETURN(sockaddr_un addr, Address(path));
  struct stat st {};
  if (lstat(path.c_str(), &st) == 0) {
    if (!S_ISSOCK(st.st_mode))
      return Status::FailedPrecondition("a file that is not a socket is there");
    unlink(path.c_str());  // a stale socket of an earlier agent
  }
  const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return Status::Unavailable("socket: " + ErrnoText(errno));
  // Mode 0666 before listen(): no connection can be made while the mode is still the umask's.
  if (bind(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof addr) != 0 ||
      chmod(path.c_str(), 0666) != 0 || listen(fd, 128) != 0) {
    const int e = errno;
    close(fd);
    unlink(path.c_str());
    return Status::Unavailable(ErrnoText(e));
  }
  return fd;
}

StatusOr<int> Connect(const std::string& path) {
  HANGAR_ASSIGN_OR_RETURN(sockaddr_un addr, Address(path));
  const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return Status::Unavailable("socket: " + ErrnoText(errno));
  if (connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof addr) != 0) {
    const int e = errno;
    close(fd);
    return Status::Unavailable(ErrnoText(e));
  }
  return fd;
}

Status WriteAll(int fd, std::string_view text, int64_t deadline) {
  size_t done = 0;
  while (done < text.size()) {
    if (deadline != kNoDeadline) {
      pollfd p{fd, POLLOUT, 0};
      const int ready = poll(&p, 1, PollMillis(deadline));
      if (ready < 0 && errno == EINTR) continue;
      if (ready <= 0) return Status::Unavailable("cannot send in time");
    }
    const ssize_t n = send(fd, text.data() + done, text.size() - done, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Status::Unavailable("send: " + ErrnoText(errno));
    if (n == 0) return Status::Unavailable("the other end closed the socket");
    done += static_cast<size_t>(n);
  }
  return Status::Ok();
}

StatusOr<std::string> ReadLine(int fd, int64_t deadline, size_t max, std::string* rest) {
  std::string text;
  char buf[8192];
  while (text.find('\n') == std::string::npos) {
    if (text.size() > max)
      return Status::InvalidArgument("the message is over " + std::to_string(max) + " bytes");
    pollfd p{fd, POLLIN, 0};
    const int ready = poll(&p, 1, PollMillis(deadline));
    if (ready < 0 && errno == EINTR) continue;
    if (ready < 0) return Status::Unavailable("poll: " + ErrnoText(errno));
    if (ready == 0) return Status::Unavailable("nothing came in time");
    const ssize_t n = read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Status::Unavailable("read: " + ErrnoText(errno));
    if (n == 0) break;
    text.append(buf, static_cast<size_t>(n));
  }
  const size_t nl = text.find('\n');
  if (rest) *rest = nl == std::string::npos ? std::string() : text.substr(nl + 1);
  if (nl != std::string::npos) text.resize(nl);
  return text;
}

}  // namespace hangar::unix_socket
