#include "controller/agent_listener.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>

#include "common/time.h"

namespace hangar::controller {
namespace {

constexpr int64_t kNanosPerMilli = 1'000'000;

uint64_t SocketInode(int fd) {
  struct stat st {};
  if (fstat(fd, &st) != 0 || !S_ISSOCK(st.st_mode)) return 0;
  return st.st_ino;
}

}  // namespace

int AgentListener::DefaultMaxConnections(int64_t nofile, int64_t reserved) {
  return static_cast<int>(std::clamp<int64_t>(nofile - reserved, 64, 1 << 20));
}

StatusOr<std::unique_ptr<AgentListener>> AgentListener::Listen(const std::string& host, int port,
                                                               Options options) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* found = nullptr;
  const std::string service = std::to_string(port);
  const std::string where = host + ":" + service;
  if (int rc = getaddrinfo(host.empty() ? nullptr : host.c_str(), service.c_str(), &hints, &found);
      rc != 0) {
    return Status::InvalidArgument("cannot listen for agents on " + where + ": " +
                                   gai_strerror(rc));
  }
  int fd = -1;
  std::string why = "no address";
  for (addrinfo* a = found; a != nullptr && fd < 0; a = a->ai_next) {
    fd = socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) continue;
    const int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    // Connections inherit it: agents' small messages go out at once.
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    if (bind(fd, a->ai_addr, a->ai_addrlen) != 0 || listen(fd, 4096) != 0) {
      why = std::strerror(errno);
      close(fd);
      fd = -1;
    }
  }
  freeaddrinfo(found);
  if (fd < 0) {
    return Status::Unavailable("cannot listen for agents on " + where + ": " + why +
                               "; is the port in use? Choose another with --agents");
  }
  sockaddr_storage bound{};
  socklen_t len = sizeof bound;
  getsockname(fd, reinterpret_cast<sockaddr*>(&bound), &len);
  const int bound_port =
      ntohs(bound.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port
                                        : reinterpret_cast<sockaddr_in*>(&bound)->sin_port);
  return std::unique_ptr<AgentListener>(new AgentListener(fd, bound_port, options));
}

AgentListener::AgentListener(int fd, int port, Options options)
    : fd_(fd), port_(port), options_(options) {
  reserve_ = open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (pipe2(wake_, O_CLOEXEC | O_NONBLOCK) != 0) wake_[0] = wake_[1] = -1;
}

AgentListener::~AgentListener() {
  Stop();
  close(fd_);
  if (reserve_ >= 0) close(reserve_);
  if (wake_[0] >= 0) close(wake_[0]);
  if (wake_[1] >= 0) close(wake_[1]);
}

void AgentListener::Start(
    std::unique_ptr<grpc::experimental::ExternalConnectionAcceptor> acceptor) {
  acceptor_ = std::move(acceptor);
  thread_ = std::thread([this] { Loop(); });
}

void AgentListener::Stop() {
  if (stop_.exchange(true) || !thread_.joinable()) return;
  if (wake_[1] >= 0) {
    ssize_t n = write(wake_[1], "x", 1);
    (void)n;
  }
  thread_.join();
}

AgentListener::Counts AgentListener::counts() const {
  MutexLock l(mu_);
  return counts_;
}

void AgentListener::Loop() {
  int64_t last_warning_ns = 0;
  while (!stop_) {
    pollfd fds[2] = {{fd_, POLLIN, 0}, {wake_[0], POLLIN, 0}};
    poll(fds, wake_[0] >= 0 ? 2 : 1, 1000);
    if (stop_) break;
    if (MonotonicNanos() - last_sweep_ns_ > 1000 * kNanosPerMilli) Sweep();
    for (;;) {
      const int fd = accept4(fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
      if (fd >= 0) {
        Hand(fd);
        continue;
      }
      const int err = errno;
      if (err == EINTR || err == ECONNABORTED || err == EPROTO) continue;
      if (err == EMFILE || err == ENFILE) {
        const bool dropped = DropOneWithReserve();
        if (MonotonicNanos() - last_warning_ns > 10'000 * kNanosPerMilli) {
          last_warning_ns = MonotonicNanos();
          spdlog::warn(
              "agent channel: out of file descriptors ({}); closing new connections until some are "
              "free "
              "({} open agent connections)",
              std::strerror(err), handed_.size());
        }
        if (dropped) continue;
        // Not even the reserve could be had: wait a little rather than spin on a readable socket.
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
      } else if (err != EAGAIN) {
        spdlog::warn("agent channel: accept failed: {}", std::strerror(err));
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
      }
      break;
    }
  }
}

bool AgentListener::DropOneWithReserve() {
  if (reserve_ < 0) reserve_ = open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (reserve_ < 0) return false;
  close(reserve_);
  reserve_ = -1;
  const int fd = accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
  if (fd >= 0) close(fd);
  reserve_ = open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  MutexLock l(mu_);
  counts_.exhausted++;
  return true;
}

void AgentListener::Hand(int fd) {
  if (static_cast<int>(handed_.size()) >= options_.max_connections &&
      MonotonicNanos() - last_sweep_ns_ > 50 * kNanosPerMilli) {
    Sweep();
  }
  if (static_cast<int>(handed_.size()) >= options_.max_connections) {
    close(fd);
    if (MonotonicNanos() - last_shed_warning_ns_ > 10'000 * kNanosPerMilli) {
      last_shed_warning_ns_ = MonotonicNanos();
      spdlog::warn(
          "agent channel: {} connections at once, its cap (--agent-max-connections): closing new "
          "ones "
          "until some end",
          handed_.size());
    }
    MutexLock l(mu_);
    counts_.shed++;
    return;
  }
  handed_[fd] = SocketInode(fd);
  grpc::experimental::ExternalConnectionAcceptor::NewConnectionParameters p;
  p.listener_fd = fd_;
  p.fd = fd;
  acceptor_->HandleNewConnection(&p);
  MutexLock l(mu_);
  counts_.accepted++;
  counts_.open = static_cast<int64_t>(handed_.size());
}

void AgentListener::Sweep() {
  std::erase_if(handed_,
                [](const auto& e) { return e.second == 0 || SocketInode(e.first) != e.second; });
  last_sweep_ns_ = MonotonicNanos();
  MutexLock l(mu_);
  counts_.open = static_cast<int64_t>(handed_.size());
}

}  // namespace hangar::controller
