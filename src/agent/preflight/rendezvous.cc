#include "agent/preflight/rendezvous.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <map>
#include <string_view>
#include <thread>

#include "common/unix_socket.h"

namespace hangar::agent::preflight {

namespace {

using Clock = std::chrono::steady_clock;

// A frame is op (1 byte), key length and key, value length and value; an answer is found (1
// byte), value length and value. Lengths are 32-bit, network order.
constexpr uint32_t kMaxFrame = 16u << 20;

bool WriteAll(int fd, const void* data, size_t n) {
  return unix_socket::WriteAll(fd, std::string_view(static_cast<const char*>(data), n)).ok();
}

bool ReadAll(int fd, void* data, size_t n) {
  char* p = static_cast<char*>(data);
  while (n > 0) {
    const ssize_t r = recv(fd, p, n, 0);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    p += r;
    n -= static_cast<size_t>(r);
  }
  return true;
}

bool WriteString(int fd, const std::string& s) {
  const uint32_t n = htonl(static_cast<uint32_t>(s.size()));
  return WriteAll(fd, &n, sizeof n) && WriteAll(fd, s.data(), s.size());
}

bool ReadString(int fd, std::string* s) {
  uint32_t n = 0;
  if (!ReadAll(fd, &n, sizeof n)) return false;
  n = ntohl(n);
  if (n > kMaxFrame) return false;
  s->resize(n);
  return n == 0 || ReadAll(fd, s->data(), n);
}

// The addresses of host:port, IPv4 or IPv6.
StatusOr<addrinfo*> Resolve(const std::string& host, int port, bool passive) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  if (passive) hints.ai_flags = AI_PASSIVE;
  addrinfo* res = nullptr;
  const int rc = getaddrinfo(host.empty() ? nullptr : host.c_str(), std::to_string(port).c_str(),
                             &hints, &res);
  if (rc != 0) return Status::Unavailable("cannot resolve '" + host + "': " + gai_strerror(rc));
  return res;
}

}  // namespace

std::string HostPort(const std::string& host, int port) {
  return (host.find(':') != std::string::npos ? "[" + host + "]" : host) + ":" +
         std::to_string(port);
}

struct RendezvousServer::Impl {
  std::map<std::string, std::string> kv;
  std::vector<int> clients;
  std::thread thread;
};

StatusOr<std::unique_ptr<RendezvousServer>> RendezvousServer::Listen(const std::string& host,
                                                                     int port) {
  HANGAR_ASSIGN_OR_RETURN(addrinfo * res, Resolve(host, port, true));
  int fd = -1;
  std::string why = "no address";
  for (addrinfo* a = res; a; a = a->ai_next) {
    fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) continue;
    const int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (bind(fd, a->ai_addr, a->ai_addrlen) == 0 && listen(fd, 1024) == 0) break;
    why = std::strerror(errno);
    close(fd);
    fd = -1;
  }
  freeaddrinfo(res);
  if (fd < 0) return Status::Unavailable("cannot listen on " + HostPort(host, port) + ": " + why);
  std::unique_ptr<RendezvousServer> s(new RendezvousServer());
  s->listen_fd_ = fd;
  if (pipe2(s->wake_, O_CLOEXEC) != 0)
    return Status::Internal("pipe: " + std::string(std::strerror(errno)));
  s->impl_ = std::make_unique<Impl>();
  s->impl_->thread = std::thread([p = s.get()] { p->Serve(); });
  return s;
}

RendezvousServer::~RendezvousServer() {
  if (wake_[1] >= 0) (void)!write(wake_[1], "x", 1);
  if (impl_ && impl_->thread.joinable()) impl_->thread.join();
  if (impl_) {
    for (int fd : impl_->clients) close(fd);
  }
  for (int fd : {listen_fd_, wake_[0], wake_[1]}) {
    if (fd >= 0) close(fd);
  }
}

void RendezvousServer::Serve() {
  for (;;) {
    std::vector<pollfd> fds = {{listen_fd_, POLLIN, 0}, {wake_[0], POLLIN, 0}};
    for (int fd : impl_->clients) fds.push_back({fd, POLLIN, 0});
    if (poll(fds.data(), fds.size(), -1) < 0) {
      if (errno == EINTR) continue;
      return;
    }
    if (fds[1].revents) return;
    if (fds[0].revents & POLLIN) {
      const int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (fd >= 0) {
        const int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        timeval tv{5, 0};  // a client that stops mid-frame does not stall the others for long
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
        impl_->clients.push_back(fd);
      }
    }
    std::vector<int> gone;
    for (size_t i = 2; i < fds.size(); ++i) {
      if (!fds[i].revents) continue;
      const int fd = fds[i].fd;
      char op = 0;
      std::string key, value;
      if (!ReadAll(fd, &op, 1) || !ReadString(fd, &key) || !ReadString(fd, &value)) {
        gone.push_back(fd);
        continue;
      }
      char found = 1;
      std::string answer;
      if (op == 'S') {
        impl_->kv.emplace(key, std::move(value));  // set once: the first value stays
      } else if (op == 'G') {
        auto it = impl_->kv.find(key);
        found = it != impl_->kv.end();
        if (found) answer = it->second;
      } else {
        gone.push_back(fd);
        continue;
      }
      if (!WriteAll(fd, &found, 1) || !WriteString(fd, answer)) gone.push_back(fd);
    }
    for (int fd : gone) {
      close(fd);
      impl_->clients.erase(std::find(impl_->clients.begin(), impl_->clients.end(), fd));
    }
  }
}

StatusOr<int> RendezvousClient::Dial(const std::string& host, int port,
                                     Clock::time_point deadline) {
  std::string why;
  do {
    auto res = Resolve(host, port, false);
    if (!res.ok()) {
      why = res.status().message();
    } else {
      for (addrinfo* a = *res; a; a = a->ai_next) {
        const int fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
        if (fd < 0) continue;
        if (connect(fd, a->ai_addr, a->ai_addrlen) == 0) {
          freeaddrinfo(*res);
          const int one = 1;
          setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
          timeval tv{10, 0};
          setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
          return fd;
        }
        why = std::strerror(errno);
        close(fd);
      }
      freeaddrinfo(*res);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  } while (Clock::now() < deadline);
  return Status::Unavailable(why.empty() ? "timed out" : why);
}

StatusOr<std::unique_ptr<RendezvousClient>> RendezvousClient::Connect(const std::string& host,
                                                                      int port,
                                                                      Clock::time_point deadline) {
  HANGAR_ASSIGN_OR_RETURN(const int fd, Dial(host, port, deadline));
  return std::unique_ptr<RendezvousClient>(new RendezvousClient(fd, host, port, deadline));
}

RendezvousClient::~RendezvousClient() {
  if (fd_ >= 0) close(fd_);
}

StatusOr<std::string> RendezvousClient::AskOnce(char op, const std::string& key,
                                                const std::string& value) {
  if (!WriteAll(fd_, &op, 1) || !WriteString(fd_, key) || !WriteString(fd_, value))
    return Status::Unavailable("the rendezvous closed the connection");
  char found = 0;
  std::string answer;
  if (!ReadAll(fd_, &found, 1) || !ReadString(fd_, &answer))
    return Status::Unavailable("the rendezvous did not answer");
  if (!found) return Status::NotFound(key);
  return answer;
}

StatusOr<std::string> RendezvousClient::Ask(char op, const std::string& key,
                                            const std::string& value) {
  auto answer = AskOnce(op, key, value);
  while (answer.status().code() == StatusCode::kUnavailable && Clock::now() < deadline_) {
    // The server went (an earlier one, giving way to rank 0's own): to the one there now, with
    // what this rank had set.
    close(fd_);
    fd_ = -1;
    auto fd = Dial(host_, port_, deadline_);
    if (!fd.ok())
      return Status::Unavailable("the rendezvous went and did not come back: " +
                                 fd.status().message());
    fd_ = *fd;
    Status replayed = Status::Ok();
    for (const auto& [k, v] : sets_) {
      if (replayed.ok()) replayed = AskOnce('S', k, v).status();
    }
    answer = replayed.ok() ? AskOnce(op, key, value) : StatusOr<std::string>(replayed);
  }
  return answer;
}

Status RendezvousClient::Set(const std::string& key, const std::string& value) {
  sets_.emplace_back(key, value);
  return Ask('S', key, value).status();
}

StatusOr<bool> RendezvousClient::Has(const std::string& key) {
  auto v = Ask('G', key, "");
  if (v.ok()) return true;
  if (v.status().code() == StatusCode::kNotFound) return false;
  return v.status();
}

StatusOr<std::string> RendezvousClient::Get(const std::string& key, Clock::time_point deadline) {
  for (int wait_ms = 2;; wait_ms = std::min(wait_ms * 2, 50)) {
    auto v = Ask('G', key, "");
    if (v.ok() || v.status().code() != StatusCode::kNotFound) return v;
    if (Clock::now() >= deadline) return Status::NotFound("'" + key + "' was not set in time");
    std::this_thread::sleep_for(std::chrono::milliseconds(wait_ms));
  }
}

}  // namespace hangar::agent::preflight
