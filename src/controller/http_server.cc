#include "controller/http_server.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <poll.h>
#include <pthread.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <climits>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <thread>
#include <type_traits>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "api/body.h"
#include "api/views.h"

namespace hangar::controller {
namespace {

int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// Waits until `fd` has `events` (or an error or hang-up, which the next call reports) or
// `deadline` passes.
bool WaitFd(int fd, short events, int64_t deadline) {
  while (true) {
    const int64_t left = std::max<int64_t>(0, deadline - NowMs());
    pollfd p{fd, events, 0};
    const int r = ::poll(&p, 1, static_cast<int>(std::min<int64_t>(left, INT_MAX)));
    if (r > 0) return true;
    if (r == 0) return false;
    if (errno != EINTR) return false;
  }
}

// The numeric address of a socket's peer (`peer`) or its own end, IPv4-mapped IPv6 as IPv4.
std::string Address(int fd, bool peer, int* port) {
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

struct Conn {
  int fd = -1;
  std::string client;  // the peer's address: the key of the per-client cap
  SSL* ssl = nullptr;
  int served = 0;  // requests so far
  bool parked = false;
  std::multimap<int64_t, Conn*>::iterator idle_at;
  // Plaintext read-ahead (TLS reads through OpenSSL's own buffer): cpp-httplib reads request
  // lines and headers a byte at a time. Dropped while the connection idles with nothing in it.
  static constexpr size_t kBuf = 4096;
  std::unique_ptr<char[]> buf;
  size_t off = 0, len = 0;
};

// One connection as cpp-httplib's Stream, on a non-blocking socket: every wait is a poll() with
// a deadline -- the header deadline while the request line and headers arrive (however slowly
// they trickle in), then the body's.
class ConnStream final : public httplib::Stream {
 public:
  ConnStream(Conn& c, const HttpLimits& limits, HttpConnStats& stats) : c_(c), limits_(limits), stats_(stats) {}

  // A request starts: its first byte is here (or the peer closed).
  void BeginRequest() {
    in_headers_ = true;
    header_bytes_ = 0;
    tail_ = 0;
    header_deadline_ = NowMs() + limits_.header_timeout;
    body_deadline_ = INT64_MAX;
  }
  // The stream refused to go on (a deadline or the header cap): the connection must close.
  bool failed() const { return failed_; }
  // Bytes of a next request already read from the socket (pipelining).
  bool Buffered() const { return c_.ssl ? SSL_has_pending(c_.ssl) == 1 : c_.off < c_.len; }

  bool is_readable() const override {
    if (failed_) return false;
    if (c_.ssl ? SSL_pending(c_.ssl) > 0 : c_.off < c_.len) return true;
    return WaitFd(c_.fd, POLLIN, ReadDeadline());
  }

  bool is_writable() const override {
    if (!WaitFd(c_.fd, POLLOUT, NowMs() + limits_.write_timeout)) return false;
    char b;  // a peer that went away (a `logs -f` that was stopped) reads as end of file
    const ssize_t n = ::recv(c_.fd, &b, 1, MSG_PEEK | MSG_DONTWAIT);
    return n > 0 || (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR));
  }

  ssize_t read(char* ptr, size_t size) override {
    if (failed_) return -1;
    if (size == 0) return 0;
    const int64_t deadline = ReadDeadline();
    if (c_.ssl) {
      while (true) {
        ERR_clear_error();
        const int n = SSL_read(c_.ssl, ptr, static_cast<int>(std::min<size_t>(size, INT_MAX)));
        if (n > 0) return Account(ptr, static_cast<size_t>(n));
        const int e = SSL_get_error(c_.ssl, n);
        if (e == SSL_ERROR_ZERO_RETURN) return 0;
        const short want = e == SSL_ERROR_WANT_READ ? POLLIN : e == SSL_ERROR_WANT_WRITE ? POLLOUT : 0;
        if (want == 0) return -1;
        if (!WaitFd(c_.fd, want, deadline)) return TimedOut();
      }
    }
    if (c_.off == c_.len) {
      if (!c_.buf) c_.buf.reset(new char[Conn::kBuf]);
      while (true) {
        const ssize_t n = ::recv(c_.fd, c_.buf.get(), Conn::kBuf, 0);
        if (n > 0) {
          c_.off = 0;
          c_.len = static_cast<size_t>(n);
          break;
        }
        if (n == 0) return 0;
        if (errno == EINTR) continue;
        if (errno != EAGAIN && errno != EWOULDBLOCK) return -1;
        if (!WaitFd(c_.fd, POLLIN, deadline)) return TimedOut();
      }
    }
    const size_t n = std::min(size, c_.len - c_.off);
    std::memcpy(ptr, c_.buf.get() + c_.off, n);
    c_.off += n;
    return Account(ptr, n);
  }

  ssize_t write(const char* ptr, size_t size) override {
    if (size == 0) return 0;
    const int64_t deadline = NowMs() + limits_.write_timeout;
    while (true) {
      if (c_.ssl) {
        ERR_clear_error();
        const int n = SSL_write(c_.ssl, ptr, static_cast<int>(std::min<size_t>(size, INT_MAX)));
        if (n > 0) return n;
        const int e = SSL_get_error(c_.ssl, n);
        const short want = e == SSL_ERROR_WANT_READ ? POLLIN : e == SSL_ERROR_WANT_WRITE ? POLLOUT : 0;
        if (want == 0 || !WaitFd(c_.fd, want, deadline)) return -1;
        continue;
      }
      const ssize_t n = ::send(c_.fd, ptr, size, MSG_NOSIGNAL);
      if (n >= 0) return n;
      if (errno == EINTR) continue;
      if ((errno != EAGAIN && errno != EWOULDBLOCK) || !WaitFd(c_.fd, POLLOUT, deadline)) return -1;
    }
  }

  void get_remote_ip_and_port(std::string& ip, int& port) const override { ip = Address(c_.fd, true, &port); }
  void get_local_ip_and_port(std::string& ip, int& port) const override { ip = Address(c_.fd, false, &port); }
  socket_t socket() const override { return c_.fd; }

 private:
  int64_t ReadDeadline() const {
    if (in_headers_) return header_deadline_;
    return std::min(body_deadline_, NowMs() + limits_.read_timeout);
  }

  ssize_t TimedOut() {
    failed_ = true;
    (in_headers_ ? stats_.header_timeouts : stats_.body_timeouts)++;
    return -1;
  }

  // Follows the header block through what is read: it ends at a line that is "\r\n" alone
  // (cpp-httplib's rule), that is at "\n\r\n".
  ssize_t Account(const char* p, size_t n) {
    if (!in_headers_) return static_cast<ssize_t>(n);
    for (size_t i = 0; i < n; ++i) {
      tail_ = ((tail_ << 8) | static_cast<unsigned char>(p[i])) & 0xFFFFFF;
      if (tail_ == 0x0A0D0A) {
        in_headers_ = false;
        body_deadline_ = NowMs() + limits_.body_timeout;
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

  Conn& c_;
  const HttpLimits& limits_;
  HttpConnStats& stats_;
  bool in_headers_ = true;
  bool failed_ = false;
  size_t header_bytes_ = 0;
  uint32_t tail_ = 0;
  int64_t header_deadline_ = 0, body_deadline_ = INT64_MAX;
};

// Every connection from accept() to close(): admitted under the caps, parked in an epoll set
// while idle, served by a worker thread while a request is under way.
class Connections {
 public:
  using Process = std::function<bool(httplib::Stream&, bool close_connection, bool& connection_closed)>;

  Connections(const HttpLimits& limits, HttpConnStats* stats, SSL_CTX* ctx, Process process)
      : limits_(limits), stats_(stats), ctx_(ctx), process_(std::move(process)) {
    epoll_ = ::epoll_create1(EPOLL_CLOEXEC);
    wake_ = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.ptr = nullptr;  // the wake-up
    ::epoll_ctl(epoll_, EPOLL_CTL_ADD, wake_, &ev);
    parker_ = std::thread([this] { ParkerLoop(); });
  }
  ~Connections() {
    Shutdown();
    ::close(epoll_);
    ::close(wake_);
  }

  // On the listener thread, for each accepted socket.
  void Adopt(int fd) {
    stats_->accepted++;
    ::fcntl(fd, F_SETFD, FD_CLOEXEC);
    ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL, 0) | O_NONBLOCK);
    const int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);  // else Nagle adds 40 ms to a POST
    std::string client = Address(fd, true, nullptr);
    std::string refusal;
    {
      std::lock_guard<std::mutex> l(count_mu_);
      int& mine = per_client_[client];
      if (stop_) {
        refusal = "the controller is stopping";
      } else if (open_ >= limits_.max_connections) {
        stats_->refused_total_cap++;
        refusal = "the controller already holds " + std::to_string(open_) +
                  " connections, its cap (--http-max-connections); try again shortly, and reuse one keep-alive "
                  "connection rather than opening many";
      } else if (mine >= limits_.max_connections_per_client) {
        stats_->refused_client_cap++;
        refusal = client + " already holds " + std::to_string(mine) +
                  " connections, the most one client may (--http-max-connections-per-client); close idle ones "
                  "or reuse a keep-alive connection";
      } else {
        ++mine;
        stats_->open = ++open_;
      }
      if (!refusal.empty() && mine == 0) per_client_.erase(client);
    }
    if (!refusal.empty()) return Refuse(fd, refusal);
    Conn* c = new Conn;
    c->fd = fd;
    c->client = std::move(client);
    Park(c);
  }

  // From the task queue's shutdown(), once the listener has stopped: closes idle connections,
  // cuts those in a request and waits for every worker to end.
  void Shutdown() {
    if (stop_.exchange(true)) return;
    {
      std::lock_guard<std::mutex> l(work_mu_);
      for (Conn* c : active_) ::shutdown(c->fd, SHUT_RDWR);
      work_cv_.notify_all();
    }
    const uint64_t one = 1;
    if (::write(wake_, &one, sizeof one) < 0) {
    }
    if (parker_.joinable()) parker_.join();
    std::unique_lock<std::mutex> l(work_mu_);
    done_cv_.wait(l, [&] { return workers_ == 0; });
    while (!ready_.empty()) {
      Conn* c = ready_.front();
      ready_.pop_front();
      l.unlock();
      Close(c, false);
      l.lock();
    }
  }

 private:
  // A refused connection hears why (plaintext; a TLS client just sees it closed) and is closed.
  void Refuse(int fd, const std::string& why) {
    if (!ctx_) {
      const std::string body = api::SafeDump(api::ErrorJson(Status::Unavailable(why))) + "\n";
      const std::string answer = "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\n"
                                 "Connection: close\r\nRetry-After: 1\r\nContent-Length: " +
                                 std::to_string(body.size()) + "\r\n\r\n" + body;
      if (::send(fd, answer.data(), answer.size(), MSG_NOSIGNAL | MSG_DONTWAIT) < 0) {
      }
    }
    ::shutdown(fd, SHUT_WR);
    char sink[4096];  // what the client sent already, so that close() sends no reset over the answer
    for (int i = 0; i < 16 && ::recv(fd, sink, sizeof sink, MSG_DONTWAIT) > 0; ++i) {
    }
    ::close(fd);
    const int64_t now = NowMs();
    int64_t last = last_refusal_log_.load();
    if (now - last >= 10 * kSecond && last_refusal_log_.compare_exchange_strong(last, now)) {
      spdlog::warn("HTTP: refused a connection: {} (refusals are counted in hangar_http_connections_refused_total; "
                   "this is logged at most every 10 s)", why);
    }
  }

  // Idle: waits in the epoll set for its next request, or idle_timeout.
  void Park(Conn* c) {
    if (c->off == c->len) {
      c->buf.reset();
      c->off = c->len = 0;
    }
    {
      std::lock_guard<std::mutex> l(park_mu_);
      if (!stop_) {
        c->idle_at = idle_.emplace(NowMs() + limits_.idle_timeout, c);
        c->parked = true;
        epoll_event ev{};
        ev.events = EPOLLIN | EPOLLRDHUP | EPOLLONESHOT;
        ev.data.ptr = c;
        if (::epoll_ctl(epoll_, EPOLL_CTL_ADD, c->fd, &ev) == 0) return;
        idle_.erase(c->idle_at);
        c->parked = false;
      }
    }
    Close(c, true);
  }

  void ParkerLoop() {
    std::vector<epoll_event> events(512);
    std::vector<Conn*> woke, expired;
    while (!stop_) {
      int timeout = 500;  // idle deadlines are kept to within this
      {
        std::lock_guard<std::mutex> l(park_mu_);
        if (!idle_.empty()) timeout = static_cast<int>(std::clamp<int64_t>(idle_.begin()->first - NowMs(), 0, 500));
      }
      const int n = ::epoll_wait(epoll_, events.data(), static_cast<int>(events.size()), timeout);
      woke.clear();
      expired.clear();
      {
        std::lock_guard<std::mutex> l(park_mu_);
        for (int i = 0; i < n; ++i) {
          auto* c = static_cast<Conn*>(events[i].data.ptr);
          if (c == nullptr) {
            uint64_t v;
            if (::read(wake_, &v, sizeof v) < 0) {
            }
            continue;
          }
          if (!c->parked) continue;
          Unpark(c);
          woke.push_back(c);
        }
        const int64_t now = NowMs();
        while (!idle_.empty() && idle_.begin()->first <= now) {
          Conn* c = idle_.begin()->second;
          Unpark(c);
          expired.push_back(c);
        }
      }
      for (Conn* c : woke) Dispatch(c);
      for (Conn* c : expired) {
        stats_->idle_closed++;
        Close(c, true);
      }
    }
    std::vector<Conn*> left;
    {
      std::lock_guard<std::mutex> l(park_mu_);
      while (!idle_.empty()) {
        left.push_back(idle_.begin()->second);
        Unpark(left.back());
      }
    }
    for (Conn* c : left) Close(c, true);
  }

  void Unpark(Conn* c) {  // park_mu_ held
    idle_.erase(c->idle_at);
    c->parked = false;
    ::epoll_ctl(epoll_, EPOLL_CTL_DEL, c->fd, nullptr);
  }

  // A request is arriving: to an idle worker, or a new one.
  void Dispatch(Conn* c) {
    std::unique_lock<std::mutex> l(work_mu_);
    if (stop_) {
      l.unlock();
      return Close(c, false);
    }
    ready_.push_back(c);
    if (idle_workers_ >= static_cast<int>(ready_.size())) {
      work_cv_.notify_one();
      return;
    }
    if (workers_ >= limits_.max_workers) return;  // it waits for a worker to come free
    if (StartWorker()) return;
    if (workers_ > 0) return;
    ready_.pop_back();
    l.unlock();
    stats_->refused_no_thread++;
    Close(c, false);
  }

  bool StartWorker() {  // work_mu_ held
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, limits_.worker_stack_bytes);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    pthread_t t;
    const int rc = pthread_create(
        &t, &attr,
        [](void* self) -> void* {
          static_cast<Connections*>(self)->WorkerLoop();
          return nullptr;
        },
        this);
    pthread_attr_destroy(&attr);
    if (rc != 0) {
      const int64_t now = NowMs();
      int64_t last = last_refusal_log_.load();
      if (now - last >= 10 * kSecond && last_refusal_log_.compare_exchange_strong(last, now)) {
        spdlog::warn("HTTP: cannot start a worker thread ({}) with {} running", std::strerror(rc), workers_);
      }
      return false;
    }
    stats_->workers = ++workers_;
    return true;
  }

  void WorkerLoop() {
    constexpr int kWarm = 4;  // workers kept however long they idle
    std::unique_lock<std::mutex> l(work_mu_);
    while (true) {
      if (ready_.empty()) {
        if (stop_) break;
        ++idle_workers_;
        const bool got = work_cv_.wait_for(l, std::chrono::seconds(30), [&] { return !ready_.empty() || stop_; });
        --idle_workers_;
        if (!got && workers_ > kWarm) break;
        continue;
      }
      Conn* c = ready_.front();
      ready_.pop_front();
      if (stop_) {
        l.unlock();
        Close(c, false);
        l.lock();
        continue;
      }
      active_.insert(c);
      l.unlock();
      Serve(c);
      l.lock();
    }
    stats_->workers = --workers_;
    done_cv_.notify_all();
  }

  bool Handshake(Conn* c) {
    c->ssl = SSL_new(ctx_);
    if (!c->ssl) return false;
    SSL_set_mode(c->ssl, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
    if (SSL_set_fd(c->ssl, c->fd) != 1) return false;
    const int64_t deadline = NowMs() + limits_.header_timeout;
    while (true) {
      ERR_clear_error();
      const int r = SSL_accept(c->ssl);
      if (r == 1) return true;
      const int e = SSL_get_error(c->ssl, r);
      const short want = e == SSL_ERROR_WANT_READ ? POLLIN : e == SSL_ERROR_WANT_WRITE ? POLLOUT : 0;
      if (want == 0) return false;
      if (!WaitFd(c->fd, want, deadline)) {
        stats_->header_timeouts++;
        return false;
      }
    }
  }

  // On a worker: requests while they come back to back, then back to the epoll set.
  void Serve(Conn* c) {
    bool graceful = false;
    if (!ctx_ || c->ssl || Handshake(c)) {
      ConnStream strm(*c, limits_, *stats_);
      while (true) {
        strm.BeginRequest();
        const bool last = c->served + 1 >= limits_.max_requests_per_connection;
        bool closed = false, ok = false;
        stats_->in_flight++;
        try {
          ok = process_(strm, last, closed);
        } catch (const std::exception& e) {
          spdlog::error("HTTP: a request from {} failed: {}", c->client, e.what());
        }
        stats_->in_flight--;
        c->served++;
        if (!ok || closed || last || strm.failed() || stop_) {
          graceful = ok && !strm.failed();
          break;
        }
        if (strm.Buffered()) continue;  // the next request is already here
        Untrack(c);
        return Park(c);
      }
    }
    Untrack(c);
    Close(c, graceful);
  }

  void Untrack(Conn* c) {
    std::lock_guard<std::mutex> l(work_mu_);
    active_.erase(c);
  }

  void Close(Conn* c, bool graceful) {
    if (c->ssl) {
      if (graceful) {
        ERR_clear_error();
        SSL_shutdown(c->ssl);  // close_notify, without waiting for the peer's
      }
      SSL_free(c->ssl);
    }
    ERR_clear_error();
    ::shutdown(c->fd, SHUT_RDWR);
    ::close(c->fd);
    {
      std::lock_guard<std::mutex> l(count_mu_);
      auto it = per_client_.find(c->client);
      if (it != per_client_.end() && --it->second <= 0) per_client_.erase(it);
      stats_->open = --open_;
    }
    delete c;
  }

  const HttpLimits limits_;
  HttpConnStats* const stats_;
  SSL_CTX* const ctx_;
  const Process process_;
  std::atomic<bool> stop_{false};
  std::atomic<int64_t> last_refusal_log_{-kMinute};

  std::mutex count_mu_;
  std::unordered_map<std::string, int> per_client_;
  int open_ = 0;

  std::mutex park_mu_;
  int epoll_ = -1, wake_ = -1;
  std::multimap<int64_t, Conn*> idle_;  // by idle deadline
  std::thread parker_;

  std::mutex work_mu_;
  std::condition_variable work_cv_, done_cv_;
  std::deque<Conn*> ready_;
  std::unordered_set<Conn*> active_;
  int workers_ = 0, idle_workers_ = 0;
};

// listen_internal() hands each accepted socket to the queue; this one runs the hand-off at once
// (process_and_close_socket(), below, only admits and parks), and its shutdown ends them all.
class AdoptQueue final : public httplib::TaskQueue {
 public:
  explicit AdoptQueue(Connections* conns) : conns_(conns) {}
  void enqueue(std::function<void()> fn) override { fn(); }
  void shutdown() override { conns_->Shutdown(); }

 private:
  Connections* conns_;
};

template <class Base>
class Hardened final : public Base, public HttpServerControl {
 public:
  template <class... Args>
  explicit Hardened(const HttpLimits& limits, Args&&... args) : Base(std::forward<Args>(args)...) {
    SSL_CTX* ctx = nullptr;
    if constexpr (std::is_same_v<Base, httplib::SSLServer>) ctx = this->ssl_context();
    conns_ = std::make_unique<Connections>(
        limits, &stats_, ctx, [this](httplib::Stream& strm, bool close_connection, bool& connection_closed) {
          return this->process_request(strm, close_connection, connection_closed, nullptr);
        });
    this->new_task_queue = [this] { return new AdoptQueue(conns_.get()); };
    // What cpp-httplib says in its Keep-Alive header; the deadlines themselves are ConnStream's.
    this->set_keep_alive_timeout(std::max<time_t>(1, limits.idle_timeout / kSecond));
    this->set_keep_alive_max_count(static_cast<size_t>(std::max(1, limits.max_requests_per_connection)));
  }

  int Bind(const std::string& host, int port, int backlog) override {
    int bound = port;
    if (port == 0) {
      bound = this->bind_to_any_port(host);
    } else if (!this->bind_to_port(host, port)) {
      bound = -1;
    }
    // cpp-httplib listens with a backlog of 5: a burst of connections would wait out SYN
    // retransmits (1 s, 3 s, ...) before anyone accepts them. listen() again widens it.
    if (bound > 0) ::listen(this->svr_sock_, backlog);
    return bound;
  }
  const HttpConnStats& stats() const override { return stats_; }

 private:
  bool process_and_close_socket(socket_t sock) override {
    conns_->Adopt(sock);
    return true;
  }

  HttpConnStats stats_;
  std::unique_ptr<Connections> conns_;
};

}  // namespace

HttpServer MakeHttpServer(const TlsFiles& tls, const HttpLimits& wanted) {
  HttpLimits limits = wanted;
  // Each connection is a file descriptor: keep the cap under what the process may open, with room
  // for the store, the agents' channel and the logs.
  rlimit nofile{};
  if (::getrlimit(RLIMIT_NOFILE, &nofile) == 0 && nofile.rlim_cur != RLIM_INFINITY) {
    const long room = static_cast<long>(nofile.rlim_cur) - 256;
    if (room < limits.max_connections) {
      spdlog::warn("HTTP: --http-max-connections {} is over what the open-file limit ({}) allows; holding at most {}",
                   limits.max_connections, nofile.rlim_cur, std::max(16L, room));
      limits.max_connections = static_cast<int>(std::max(16L, room));
    }
  }
  HttpServer out;
  if (tls.empty()) {
    auto s = std::make_unique<Hardened<httplib::Server>>(limits);
    out.control = s.get();
    out.server = std::move(s);
  } else {
    auto s = std::make_unique<Hardened<httplib::SSLServer>>(limits, tls.cert.c_str(), tls.key.c_str());
    out.control = s.get();
    out.server = std::move(s);
  }
  return out;
}

}  // namespace hangar::controller
