#include "controller/http_server.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <poll.h>
#include <pthread.h>
#include <spdlog/spdlog.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <climits>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <functional>
#include <map>
#include <thread>
#include <type_traits>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "api/body.h"
#include "api/views.h"
#include "common/mutex.h"
#include "controller/http_conn.h"

namespace hangar::controller {
namespace {

class Connections;

// The request a worker thread is serving, for TakeStream (called from inside the route's handler).
struct Serving {
  Connections* conns = nullptr;
  Conn* conn = nullptr;
};
thread_local Serving tl_serving;

// Every connection from accept() to close(): admitted under the caps, parked in an epoll set
// while idle and while its TLS handshake and request head arrive, served by a worker thread once
// a whole head is in hand, and handed to the stream pump when a route streams.
class Connections {
 public:
  using Process =
      std::function<bool(httplib::Stream&, bool close_connection, bool& connection_closed)>;

  Connections(const HttpLimits& limits, HttpConnStats* stats, SSL_CTX* ctx, Process process)
      : limits_(limits),
        stats_(stats),
        ctx_(ctx),
        process_(std::move(process)),
        pump_(limits.streams, &stats->streams,
              [this](const std::string& client) { Forget(client); }) {
    park_.epoll = ::epoll_create1(EPOLL_CLOEXEC);
    park_.wake = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.ptr = nullptr;  // the wake-up
    ::epoll_ctl(park_.epoll, EPOLL_CTL_ADD, park_.wake, &ev);
    park_.thread = std::thread([this] { ParkerLoop(); });
  }
  ~Connections() {
    Shutdown();
    ::close(park_.epoll);
    ::close(park_.wake);
  }

  // On the listener thread, for each accepted socket.
  void Adopt(int fd) HANGAR_EXCLUDES(counts_.mu, park_.mu) {
    stats_->accepted++;
    ::fcntl(fd, F_SETFD, FD_CLOEXEC);
    ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL, 0) | O_NONBLOCK);
    const int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one,
                 sizeof one);  // else Nagle adds 40 ms to a POST
    std::string client = SocketAddress(fd, true, nullptr);
    std::string refusal;
    {
      MutexLock l(counts_.mu);
      int& mine = counts_.per_client[client];
      if (stop_) {
        refusal = "the controller is stopping";
      } else if (counts_.open >= limits_.max_connections) {
        stats_->refused_total_cap++;
        refusal = "the controller already holds " + std::to_string(counts_.open) +
                  " connections, its cap (--http-max-connections); try again shortly, and reuse "
                  "one keep-alive "
                  "connection rather than opening many";
      } else if (mine >= limits_.max_connections_per_client) {
        stats_->refused_client_cap++;
        refusal = client + " already holds " + std::to_string(mine) +
                  " connections, the most one client may (--http-max-connections-per-client); "
                  "close idle ones "
                  "or reuse a keep-alive connection";
      } else {
        ++mine;
        stats_->open = ++counts_.open;
      }
      if (!refusal.empty() && mine == 0) counts_.per_client.erase(client);
    }
    if (!refusal.empty()) return Refuse(fd, refusal);
    Conn* c = new Conn;
    c->fd = fd;
    c->client = std::move(client);
    c->deadline = MonotonicMs() + limits_.idle_timeout;
    Park(c, ConnStep::kWaitRead);
  }

  // From a route's handler on a worker (HttpServerControl::TakeStream).
  StatusOr<std::shared_ptr<StreamSink>> TakeStream(const StreamHead& head) {
    Conn* c = tl_serving.conns == this ? tl_serving.conn : nullptr;
    if (!c) return Status::Internal("a stream can be taken only from inside a route's handler");
    if (c->stream) return Status::Internal("this request's connection already streams");
    std::string text = "HTTP/1.1 200 OK\r\nContent-Type: " + head.content_type + "\r\n";
    for (const auto& [name, value] : head.headers) text += name + ": " + value + "\r\n";
    text += "Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n";
    HANGAR_ASSIGN_OR_RETURN(c->stream,
                            pump_.Open(c->client, std::move(text), head.server_sent_events));
    return c->stream;
  }

  // From the task queue's shutdown(), once the listener has stopped: closes idle connections,
  // cuts those in a request, waits for every worker to end and closes the streams.
  void Shutdown() HANGAR_EXCLUDES(work_mu_) {
    if (stop_.exchange(true)) return;
    {
      MutexLock l(work_mu_);
      for (Conn* c : active_) ::shutdown(c->fd, SHUT_RDWR);
      work_cv_.notify_all();
    }
    const uint64_t one = 1;
    if (::write(park_.wake, &one, sizeof one) < 0) {
    }
    if (park_.thread.joinable()) park_.thread.join();
    MutexLock l(work_mu_);
    l.Wait(done_cv_, [&]() HANGAR_REQUIRES(work_mu_) { return workers_ == 0; });
    while (!ready_.empty()) {
      Conn* c = ready_.front();
      ready_.pop_front();
      l.Unlock();
      Close(c, false);
      l.Lock();
    }
    l.Unlock();
    pump_.Stop();
  }

 private:
  // A refused connection hears why (plaintext; a TLS client just sees it closed) and is closed.
  void Refuse(int fd, const std::string& why) {
    if (!ctx_) {
      const std::string body = api::SafeDump(api::ErrorJson(Status::Unavailable(why))) + "\n";
      const std::string answer =
          "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\n"
          "Connection: close\r\nRetry-After: 1\r\nContent-Length: " +
          std::to_string(body.size()) + "\r\n\r\n" + body;
      if (::send(fd, answer.data(), answer.size(), MSG_NOSIGNAL | MSG_DONTWAIT) < 0) {
      }
    }
    ::shutdown(fd, SHUT_WR);
    char
        sink[4096];  // what the client sent already, so that close() sends no reset over the answer
    for (int i = 0; i < 16 && ::recv(fd, sink, sizeof sink, MSG_DONTWAIT) > 0; ++i) {
    }
    ::close(fd);
    const int64_t now = MonotonicMs();
    int64_t last = last_refusal_log_.load();
    if (now - last >= 10 * kSecond && last_refusal_log_.compare_exchange_strong(last, now)) {
      spdlog::warn(
          "HTTP: refused a connection: {} (refusals are counted in "
          "hangar_http_connections_refused_total; "
          "this is logged at most every 10 s)",
          why);
    }
  }

  // Waits in the epoll set, until c->deadline, for what `wait` says.
  void Park(Conn* c, ConnStep wait) HANGAR_EXCLUDES(park_.mu) {
    if (c->phase == Conn::Phase::kIdle && c->in_off == c->in.size()) {
      std::string().swap(c->in);  // an idle connection holds no buffer
      c->in_off = 0;
    }
    {
      MutexLock l(park_.mu);
      if (!stop_) {
        c->parked_at = park_.parked.emplace(c->deadline, c);
        c->parked = true;
        epoll_event ev{};
        ev.events = (wait == ConnStep::kWaitWrite ? EPOLLOUT : EPOLLIN) | EPOLLRDHUP | EPOLLONESHOT;
        ev.data.ptr = c;
        if (::epoll_ctl(park_.epoll, EPOLL_CTL_ADD, c->fd, &ev) == 0) return;
        park_.parked.erase(c->parked_at);
        c->parked = false;
      }
    }
    Close(c, true);
  }

  void ParkerLoop() HANGAR_EXCLUDES(park_.mu) {
    std::vector<epoll_event> events(512);
    std::vector<Conn*> woke, expired;
    while (!stop_) {
      int timeout = 500;  // deadlines are kept to within this
      {
        MutexLock l(park_.mu);
        if (!park_.parked.empty()) {
          timeout = static_cast<int>(
              std::clamp<int64_t>(park_.parked.begin()->first - MonotonicMs(), 0, 500));
        }
      }
      const int n =
          ::epoll_wait(park_.epoll, events.data(), static_cast<int>(events.size()), timeout);
      woke.clear();
      expired.clear();
      {
        MutexLock l(park_.mu);
        for (int i = 0; i < n; ++i) {
          auto* c = static_cast<Conn*>(events[i].data.ptr);
          if (c == nullptr) {
            uint64_t v;
            if (::read(park_.wake, &v, sizeof v) < 0) {
            }
            continue;
          }
          if (!c->parked) continue;
          Unpark(c);
          woke.push_back(c);
        }
        const int64_t now = MonotonicMs();
        while (!park_.parked.empty() && park_.parked.begin()->first <= now) {
          Conn* c = park_.parked.begin()->second;
          Unpark(c);
          expired.push_back(c);
        }
      }
      for (Conn* c : woke) Step(c);
      for (Conn* c : expired) Expire(c);
    }
    std::vector<Conn*> left;
    {
      MutexLock l(park_.mu);
      while (!park_.parked.empty()) {
        left.push_back(park_.parked.begin()->second);
        Unpark(left.back());
      }
    }
    for (Conn* c : left) Close(c, c->phase == Conn::Phase::kIdle);
  }

  // On the parker: as far as the connection goes without blocking, then to a worker or back.
  void Step(Conn* c) {
    const ConnStep next = Advance(*c, ctx_, limits_, *stats_);
    if (next == ConnStep::kServe) return Dispatch(c);
    if (next == ConnStep::kClose) return Close(c, false);
    Park(c, next);
  }

  void Expire(Conn* c) {
    if (c->phase == Conn::Phase::kIdle) stats_->idle_closed++;
    if (c->phase == Conn::Phase::kHead)
      stats_->header_timeouts++;  // slowloris, or a slow handshake
    Close(c, c->phase == Conn::Phase::kIdle);
  }

  void Unpark(Conn* c) HANGAR_REQUIRES(park_.mu) {
    park_.parked.erase(c->parked_at);
    c->parked = false;
    ::epoll_ctl(park_.epoll, EPOLL_CTL_DEL, c->fd, nullptr);
  }

  // A request head is in hand: to an idle worker, or a new one.
  void Dispatch(Conn* c) HANGAR_EXCLUDES(work_mu_) {
    MutexLock l(work_mu_);
    if (stop_) {
      l.Unlock();
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
    l.Unlock();
    stats_->refused_no_thread++;
    Close(c, false);
  }

  bool StartWorker() HANGAR_REQUIRES(work_mu_) {
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
      const int64_t now = MonotonicMs();
      int64_t last = last_refusal_log_.load();
      if (now - last >= 10 * kSecond && last_refusal_log_.compare_exchange_strong(last, now)) {
        spdlog::warn("HTTP: cannot start a worker thread ({}) with {} running", std::strerror(rc),
                     workers_);
      }
      return false;
    }
    stats_->workers = ++workers_;
    return true;
  }

  void WorkerLoop() HANGAR_EXCLUDES(work_mu_) {
    constexpr int kWarm = 4;  // workers kept however long they idle
    MutexLock l(work_mu_);
    while (true) {
      if (ready_.empty()) {
        if (stop_) break;
        ++idle_workers_;
        const bool got =
            l.WaitFor(work_cv_, std::chrono::seconds(30),
                      [&]() HANGAR_REQUIRES(work_mu_) { return !ready_.empty() || stop_; });
        --idle_workers_;
        if (!got && workers_ > kWarm) break;
        continue;
      }
      Conn* c = ready_.front();
      ready_.pop_front();
      if (stop_) {
        l.Unlock();
        Close(c, false);
        l.Lock();
        continue;
      }
      active_.insert(c);
      l.Unlock();
      Serve(c);
      l.Lock();
    }
    stats_->workers = --workers_;
    done_cv_.notify_all();
  }

  // One request, whose head is in hand; a route may take the connection for a stream.
  bool ServeOne(Conn* c, ConnStream& strm, bool last, bool& closed) {
    strm.BeginRequest();
    bool ok = false;
    stats_->in_flight++;
    tl_serving = {this, c};
    try {
      ok = process_(strm, last, closed);
    } catch (const std::exception& e) {
      spdlog::error("HTTP: a request from {} failed: {}", c->client, e.what());
    }
    tl_serving = {};
    stats_->in_flight--;
    c->served++;
    return ok;
  }

  // On a worker: requests while their heads are in hand, then back to the parker.
  void Serve(Conn* c) {
    ConnStream strm(*c, limits_, *stats_);
    bool graceful = false;
    while (true) {
      const bool last = c->served + 1 >= limits_.max_requests_per_connection;
      bool closed = false;
      const bool ok = ServeOne(c, strm, last, closed);
      if (c->stream) return HandOff(c);
      if (!ok || closed || last || strm.failed() || stop_) {
        graceful = ok && !strm.failed();
        break;
      }
      c->in.erase(0, c->in_off);  // what is left is the next request's
      c->in_off = 0;
      c->phase = Conn::Phase::kIdle;
      c->deadline = MonotonicMs() + limits_.idle_timeout;
      const ConnStep next = Advance(*c, ctx_, limits_, *stats_);
      if (next == ConnStep::kServe) continue;  // the next request is already here
      Untrack(c);
      if (next == ConnStep::kClose) return Close(c, false);
      return Park(c, next);
    }
    Untrack(c);
    Close(c, graceful);
  }

  // The route took the connection for a stream: the pump owns its socket (and TLS session) from
  // here; the connection stays counted until the pump closes it.
  void HandOff(Conn* c) {
    Untrack(c);
    pump_.Attach(c->stream, c->fd, c->secured ? c->ssl : nullptr);
    delete c;
  }

  void Untrack(Conn* c) HANGAR_EXCLUDES(work_mu_) {
    MutexLock l(work_mu_);
    active_.erase(c);
  }

  void Close(Conn* c, bool graceful) {
    if (c->ssl) {
      if (graceful && c->secured) {
        ERR_clear_error();
        SSL_shutdown(c->ssl);  // close_notify, without waiting for the peer's
      }
      SSL_free(c->ssl);
    }
    ERR_clear_error();
    ::shutdown(c->fd, SHUT_RDWR);
    ::close(c->fd);
    Forget(c->client);
    delete c;
  }

  // A connection of `client` was closed (here, or by the stream pump).
  void Forget(const std::string& client) HANGAR_EXCLUDES(counts_.mu) {
    MutexLock l(counts_.mu);
    auto it = counts_.per_client.find(client);
    if (it != counts_.per_client.end() && --it->second <= 0) counts_.per_client.erase(it);
    stats_->open = --counts_.open;
  }

  const HttpLimits limits_;
  HttpConnStats* const stats_;
  SSL_CTX* const ctx_;
  const Process process_;
  std::atomic<bool> stop_{false};
  std::atomic<int64_t> last_refusal_log_{-kMinute};

  // The connections open, in all and per client (the limits' counts).
  struct Counts {
    Mutex mu;
    std::unordered_map<std::string, int> per_client HANGAR_GUARDED_BY(mu);
    int open HANGAR_GUARDED_BY(mu) = 0;
  } counts_;

  // Connections waiting for input in epoll until their deadline, and the thread that wakes them.
  struct Parking {
    Mutex mu;
    int epoll = -1, wake = -1;  // set in the constructor, closed in the destructor
    std::multimap<int64_t, Conn*> parked HANGAR_GUARDED_BY(mu);  // by deadline
    std::thread thread;
  } park_;

  Mutex work_mu_;
  std::condition_variable work_cv_, done_cv_;
  std::deque<Conn*> ready_ HANGAR_GUARDED_BY(work_mu_);
  std::unordered_set<Conn*> active_ HANGAR_GUARDED_BY(work_mu_);
  int workers_ HANGAR_GUARDED_BY(work_mu_) = 0, idle_workers_ HANGAR_GUARDED_BY(work_mu_) = 0;

  StreamPump pump_;  // last: its thread calls Forget() until it stops
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
        limits, &stats_, ctx,
        [this](httplib::Stream& strm, bool close_connection, bool& connection_closed) {
          return this->process_request(strm, close_connection, connection_closed, nullptr);
        });
    this->new_task_queue = [this] { return new AdoptQueue(conns_.get()); };
    // What cpp-httplib says in its Keep-Alive header; the deadlines themselves are ConnStream's.
    this->set_keep_alive_timeout(std::max<time_t>(1, limits.idle_timeout / kSecond));
    this->set_keep_alive_max_count(
        static_cast<size_t>(std::max(1, limits.max_requests_per_connection)));
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
  StatusOr<std::shared_ptr<StreamSink>> TakeStream(const StreamHead& head) override {
    return conns_->TakeStream(head);
  }

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
      spdlog::warn(
          "HTTP: --http-max-connections {} is over what the open-file limit ({}) allows; holding "
          "at most {}",
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
    auto s =
        std::make_unique<Hardened<httplib::SSLServer>>(limits, tls.cert.c_str(), tls.key.c_str());
    out.control = s.get();
    out.server = std::move(s);
  }
  return out;
}

}  // namespace hangar::controller
