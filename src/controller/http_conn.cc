#include "controller/http_conn.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <openssl/err.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cstring>
#include <optional>
#include <string_view>

#include "api/body.h"
#include "api/views.h"

namespace hangar::controller {
namespace {

constexpr size_t kReadAhead = 4096;
constexpr size_t kMaxDrained = 1 << 20;  // what is read and dropped after an error answer
constexpr Duration kDrainTime = 2 * kSecond;

// Waits until `fd` has `events` (or an error or hang-up, which the next call reports) or
// `deadline` passes.
bool WaitFd(int fd, short events, int64_t deadline) {
  while (true) {
    const int64_t left = std::max<int64_t>(0, deadline - MonotonicMs());
    pollfd p{fd, events, 0};
    const int r = ::poll(&p, 1, static_cast<int>(std::min<int64_t>(left, INT_MAX)));
    if (r > 0) return true;
    if (r == 0) return false;
    if (errno != EINTR) return false;
  }
}

// Reads what is there (up to kReadAhead) onto the end of c.in without blocking: bytes read, 0 at
// the end of the stream, -1 on an error, or -2/-3 when it would block for reading/writing.
ssize_t ReadSome(Conn& c) {
  const size_t at = c.in.size();
  c.in.resize(at + kReadAhead);
  ssize_t n;
  if (c.ssl) {
    ERR_clear_error();
    const int r = SSL_read(c.ssl, c.in.data() + at, static_cast<int>(kReadAhead));
    n = r;
    if (r <= 0) {
      const int e = SSL_get_error(c.ssl, r);
      n = e == SSL_ERROR_ZERO_RETURN  ? 0
          : e == SSL_ERROR_WANT_READ  ? -2
          : e == SSL_ERROR_WANT_WRITE ? -3
                                      : -1;
    }
  } else {
    do {
      n = ::recv(c.fd, c.in.data() + at, kReadAhead, MSG_DONTWAIT);
    } while (n < 0 && errno == EINTR);
    if (n < 0) n = errno == EAGAIN || errno == EWOULDBLOCK ? -2 : -1;
  }
  c.in.resize(at + static_cast<size_t>(std::max<ssize_t>(n, 0)));
  return n;
}

// Reads and drops what the client still sends after an error answer, so that closing the socket
// does not reset the connection over the answer before the client has read it.
ConnStep Drain(Conn& c) {
  char buf[4096];
  while (c.drained < kMaxDrained) {
    const ssize_t n = ::recv(c.fd, buf, sizeof buf, MSG_DONTWAIT);
    if (n > 0) {
      c.drained += static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    return n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) ? ConnStep::kWaitRead
                                                              : ConnStep::kClose;
  }
  return ConnStep::kClose;
}

// Answers `status` with `why` as the API's error JSON, then drains the connection and closes it.
ConnStep Refuse(Conn& c, const char* status, const std::string& why) {
  const std::string body = api::SafeDump(api::ErrorJson(Status::InvalidArgument(why))) + "\n";
  const std::string answer =
      std::string("HTTP/1.1 ") + status + "\r\nContent-Type: application/json\r\n" +
      "Connection: close\r\nContent-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
  // One small write into an empty socket buffer: it fits, or the client is gone.
  if (c.ssl) {
    ERR_clear_error();
    if (SSL_write(c.ssl, answer.data(), static_cast<int>(answer.size())) > 0) SSL_shutdown(c.ssl);
    ERR_clear_error();
  } else if (::send(c.fd, answer.data(), answer.size(), MSG_NOSIGNAL | MSG_DONTWAIT) < 0) {
  }
  ::shutdown(c.fd, SHUT_WR);
  c.in.clear();
  c.in_off = 0;
  c.phase = Conn::Phase::kDrain;
  c.deadline = MonotonicMs() + kDrainTime;
  return Drain(c);
}

// Whether the head in c.in (from in_off) is whole, and within the caps; answers it when not.
// cpp-httplib ends a head at a line that is "\r\n" alone, that is at "\n\r\n".
std::optional<ConnStep> CheckHead(Conn& c, const HttpLimits& limits, HttpConnStats& stats) {
  const std::string_view text = std::string_view(c.in).substr(c.in_off);
  const size_t line_end = text.find('\n');
  const size_t line = line_end == std::string_view::npos ? text.size() : line_end + 1;
  if (line > limits.max_request_line_bytes) {
    stats.uri_too_long++;
    return Refuse(c, "414 URI Too Long",
                  "the request line is over " +
                      std::to_string(limits.max_request_line_bytes / 1024) +
                      " KiB; send long lists in a request body, or ask for fewer items at a time");
  }
  const size_t end = text.find("\n\r\n");
  const size_t head = end == std::string_view::npos ? text.size() : end + 3;
  if (head > limits.max_header_bytes) {
    stats.headers_too_large++;
    return Refuse(c, "431 Request Header Fields Too Large",
                  "the request's headers are over " +
                      std::to_string(limits.max_header_bytes / 1024) +
                      " KiB; send fewer or shorter headers");
  }
  if (end != std::string_view::npos) return ConnStep::kServe;
  return std::nullopt;
}

}  // namespace

int64_t MonotonicMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

std::string SocketAddress(int fd, bool peer, int* port) {
  sockaddr_storage a{};
  socklen_t len = sizeof a;
  const int r = peer ? ::getpeername(fd, reinterpret_cast<sockaddr*>(&a), &len)
                     : ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  if (r != 0) return "";
  char text[INET6_ADDRSTRLEN] = {};
  if (a.ss_family == AF_INET) {
    const auto* v4 = reinterpret_cast<const sockaddr_in*>(&a);
    ::inet_ntop(AF_INET, &v4->sin_addr, text, sizeof text);
    if (port) *port = ntohs(v4->sin_port);
  } else if (a.ss_family == AF_INET6) {
    const auto* v6 = reinterpret_cast<const sockaddr_in6*>(&a);
    if (IN6_IS_ADDR_V4MAPPED(&v6->sin6_addr)) {
      ::inet_ntop(AF_INET, &v6->sin6_addr.s6_addr[12], text, sizeof text);
    } else {
      ::inet_ntop(AF_INET6, &v6->sin6_addr, text, sizeof text);
    }
    if (port) *port = ntohs(v6->sin6_port);
  }
  return text;
}

bool Buffered(const Conn& c) {
  return c.in_off < c.in.size() || (c.ssl && SSL_has_pending(c.ssl) == 1);
}

ConnStep Advance(Conn& c, SSL_CTX* ctx, const HttpLimits& limits, HttpConnStats& stats) {
  if (c.phase == Conn::Phase::kDrain) return Drain(c);
  auto begin = [&] {  // the first byte of a request (or of its TLS handshake) is here
    if (c.phase != Conn::Phase::kIdle) return;
    c.phase = Conn::Phase::kHead;
    c.deadline = MonotonicMs() + limits.header_timeout;
  };
  if (ctx && !c.secured) {
    begin();  // only readiness brings a connection without a session here
    if (!c.ssl) {
      c.ssl = SSL_new(ctx);
      if (!c.ssl || SSL_set_fd(c.ssl, c.fd) != 1) return ConnStep::kClose;
      SSL_set_mode(c.ssl, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
      SSL_set_accept_state(c.ssl);
    }
    ERR_clear_error();
    const int r = SSL_do_handshake(c.ssl);
    if (r != 1) {
      const int e = SSL_get_error(c.ssl, r);
      ERR_clear_error();
      if (e == SSL_ERROR_WANT_READ) return ConnStep::kWaitRead;
      if (e == SSL_ERROR_WANT_WRITE) return ConnStep::kWaitWrite;
      return ConnStep::kClose;  // a client of another CA, or not TLS at all
    }
    c.secured = true;
  }
  if (c.in_off < c.in.size()) begin();
  while (true) {
    if (auto step = CheckHead(c, limits, stats)) return *step;
    const ssize_t n = ReadSome(c);
    if (n > 0) {
      begin();
      continue;
    }
    if (n == -2) return ConnStep::kWaitRead;
    if (n == -3) return ConnStep::kWaitWrite;
    return ConnStep::kClose;
  }
}

void ConnStream::BeginRequest() {
  in_headers_ = true;
  header_bytes_ = 0;
  tail_ = 0;
  header_deadline_ = MonotonicMs() + limits_.header_timeout;
  body_deadline_ = INT64_MAX;
}

bool ConnStream::is_readable() const {
  if (failed_) return false;
  if (Buffered(c_)) return true;
  return WaitFd(c_.fd, POLLIN, ReadDeadline());
}

bool ConnStream::is_writable() const {
  if (c_.stream) return false;  // a stream took the connection: cpp-httplib's answer is not sent
  if (!WaitFd(c_.fd, POLLOUT, MonotonicMs() + limits_.write_timeout)) return false;
  char b;  // a peer that went away reads as end of file
  const ssize_t n = ::recv(c_.fd, &b, 1, MSG_PEEK | MSG_DONTWAIT);
  return n > 0 || (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR));
}

ssize_t ConnStream::read(char* ptr, size_t size) {
  if (failed_) return -1;
  if (size == 0) return 0;
  if (c_.in_off == c_.in.size()) {
    c_.in.clear();
    c_.in_off = 0;
    const ssize_t n = Fill(ReadDeadline());
    if (n <= 0) return n;
  }
  const size_t n = std::min(size, c_.in.size() - c_.in_off);
  std::memcpy(ptr, c_.in.data() + c_.in_off, n);
  c_.in_off += n;
  return Account(ptr, n);
}

// Reads into the empty c.in, waiting up to `deadline`: bytes read, 0 at the end, -1 on failure.
ssize_t ConnStream::Fill(int64_t deadline) {
  while (true) {
    const ssize_t n = ReadSome(c_);
    if (n >= 0) return n;
    if (n == -1) return -1;
    if (!WaitFd(c_.fd, n == -2 ? POLLIN : POLLOUT, deadline)) return TimedOut();
  }
}

ssize_t ConnStream::write(const char* ptr, size_t size) {
  if (c_.stream) return -1;  // see is_writable()
  if (size == 0) return 0;
  const int64_t deadline = MonotonicMs() + limits_.write_timeout;
  while (true) {
    if (c_.ssl) {
      ERR_clear_error();
      const int n = SSL_write(c_.ssl, ptr, static_cast<int>(std::min<size_t>(size, INT_MAX)));
      if (n > 0) return n;
      const int e = SSL_get_error(c_.ssl, n);
      const short want = e == SSL_ERROR_WANT_READ    ? POLLIN
                         : e == SSL_ERROR_WANT_WRITE ? POLLOUT
                                                     : 0;
      if (want == 0 || !WaitFd(c_.fd, want, deadline)) return -1;
      continue;
    }
    const ssize_t n = ::send(c_.fd, ptr, size, MSG_NOSIGNAL);
    if (n >= 0) return n;
    if (errno == EINTR) continue;
    if ((errno != EAGAIN && errno != EWOULDBLOCK) || !WaitFd(c_.fd, POLLOUT, deadline)) return -1;
  }
}

int64_t ConnStream::ReadDeadline() const {
  if (in_headers_) return header_deadline_;
  return std::min(body_deadline_, MonotonicMs() + limits_.read_timeout);
}

ssize_t ConnStream::TimedOut() {
  failed_ = true;
  (in_headers_ ? stats_.header_timeouts : stats_.body_timeouts)++;
  return -1;
}

// Follows the header block through what is read (the parker checked it whole and under its cap;
// this starts the body's deadline where it ends).
ssize_t ConnStream::Account(const char* p, size_t n) {
  if (!in_headers_) return static_cast<ssize_t>(n);
  for (size_t i = 0; i < n; ++i) {
    tail_ = ((tail_ << 8) | static_cast<unsigned char>(p[i])) & 0xFFFFFF;
    if (tail_ == 0x0A0D0A) {
      in_headers_ = false;
      body_deadline_ = MonotonicMs() + limits_.body_timeout;
      return static_cast<ssize_t>(n);
    }
  }
  header_bytes_ += n;
  if (header_bytes_ > limits_.max_header_bytes) {
    failed_ = true;
    stats_.headers_too_large++;
    return -1;
  }
  return static_cast<ssize_t>(n);
}

}  // namespace hangar::controller
