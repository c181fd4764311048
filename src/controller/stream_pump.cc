#include "controller/stream_pump.h"

#include <openssl/err.h>
#include <spdlog/spdlog.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <climits>
#include <cstdio>

namespace hangar::controller {
namespace {

int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

constexpr size_t kMaxDiscarded = 64 * 1024;  // what a client may send after its request
constexpr int kSweepMs = 500;                // keep-alives and stalls are checked this often

// Writes what it can of [p, p+n) without blocking: bytes written, 0 when the socket is full, -1
// when the connection failed.
ssize_t WriteSome(int fd, SSL* ssl, const char* p, size_t n) {
  if (ssl) {
    ERR_clear_error();
    const int r = SSL_write(ssl, p, static_cast<int>(std::min<size_t>(n, INT_MAX)));
    if (r > 0) return r;
    const int e = SSL_get_error(ssl, r);
    // WANT_READ: a renegotiation or key update waits for the client's next record; the socket is
    // always watched for reading, and a readable one retries the write.
    return e == SSL_ERROR_WANT_WRITE || e == SSL_ERROR_WANT_READ ? 0 : -1;
  }
  while (true) {
    const ssize_t r = ::send(fd, p, n, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (r >= 0) return r;
    if (errno == EINTR) continue;
    return errno == EAGAIN || errno == EWOULDBLOCK ? 0 : -1;
  }
}

}  // namespace

StreamSink::Chunk StreamSink::Frame(std::string_view data) {
  char size[24];
  const int n = std::snprintf(size, sizeof size, "%zx\r\n", data.size());
  auto out = std::make_shared<std::string>();
  out->reserve(static_cast<size_t>(n) + data.size() + 2);
  out->append(size, static_cast<size_t>(n)).append(data).append("\r\n");
  return out;
}

bool StreamSink::Write(Chunk chunk) {
  MutexLock l(mu_);
  if (ended_) return false;
  if (chunk->empty()) return true;
  if (buffered_ + chunk->size() > pump_->limits_.max_buffered_bytes) {
    // A client this far behind is dropped, not buffered for without end.
    ended_ = dropped_ = true;
    pump_->Notify(this);
    return false;
  }
  const int64_t now = NowMs();
  if (buffered_ == 0) progress_at_ = now;
  sent_at_ = now;
  buffered_ += chunk->size();
  queue_.push_back(std::move(chunk));
  pump_->Notify(this);
  return true;
}

void StreamSink::Finish() {
  MutexLock l(mu_);
  if (ended_) return;
  static const Chunk kLast = std::make_shared<const std::string>("0\r\n\r\n");
  if (buffered_ == 0) progress_at_ = NowMs();
  buffered_ += kLast->size();
  queue_.push_back(kLast);
  ended_ = finished_ = true;
  pump_->Notify(this);
}

bool StreamSink::open() const {
  MutexLock l(mu_);
  return !ended_;
}

size_t StreamSink::buffered() const {
  MutexLock l(mu_);
  return buffered_;
}

StreamPump::StreamPump(const StreamLimits& limits, StreamStats* stats,
                       std::function<void(const std::string&)> released)
    : limits_(limits), stats_(stats), released_(std::move(released)) {
  epoll_ = ::epoll_create1(EPOLL_CLOEXEC);
  wake_ = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.fd = -1;  // the wake-up
  ::epoll_ctl(epoll_, EPOLL_CTL_ADD, wake_, &ev);
  thread_ = std::thread([this] { Loop(); });
}

StreamPump::~StreamPump() {
  Stop();
  ::close(epoll_);
  ::close(wake_);
}

StatusOr<std::shared_ptr<StreamSink>> StreamPump::Open(const std::string& client, std::string head,
                                                       bool sse) {
  // Filled before the pump's lock is taken: the pump's threads take a sink's lock first.
  std::shared_ptr<StreamSink> s(new StreamSink(this, client, sse));
  {
    MutexLock sl(s->mu_);
    s->buffered_ = head.size();
    s->progress_at_ = s->sent_at_ = NowMs();
    s->queue_.push_back(std::make_shared<const std::string>(std::move(head)));
  }
  MutexLock l(mu_);
  if (stopped_) return Status::Unavailable("the controller is stopping; try again in a moment");
  int& mine = per_client_[client];
  if (static_cast<int>(opened_.size()) >= limits_.max_streams ||
      mine >= limits_.max_streams_per_client) {
    const bool all = static_cast<int>(opened_.size()) >= limits_.max_streams;
    if (mine == 0) per_client_.erase(client);
    stats_->refused++;
    return Status::Unavailable(
        all ? "the controller already serves " + std::to_string(limits_.max_streams) +
                  " live feeds and log follows, its cap (--http-max-streams); close dashboards or "
                  "`hangar logs -f` "
                  "that nobody watches, or try again later"
            : client + " already holds " + std::to_string(limits_.max_streams_per_client) +
                  " live feeds and log follows, the most one client may "
                  "(--http-max-streams-per-client); close "
                  "some first");
  }
  ++mine;
  opened_.emplace(s.get(), s);
  stats_->opened++;
  stats_->open = static_cast<int64_t>(opened_.size());
  return s;
}

void StreamPump::Attach(const std::shared_ptr<StreamSink>& sink, int fd, SSL* ssl) {
  {
    MutexLock l(mu_);
    if (!stopped_) {
      attach_.push_back({sink, fd, ssl});
      fd = -1;
    }
  }
  if (fd >= 0) {  // stopping: the pump's loop has ended, or will before it reads attach_
    if (ssl) SSL_free(ssl);
    ::close(fd);
    released_(sink->client_);
    return;
  }
  const uint64_t one = 1;
  if (::write(wake_, &one, sizeof one) < 0) {
  }
}

void StreamPump::Notify(StreamSink* sink) {
  if (sink->dirty_) return;
  sink->dirty_ = true;
  {
    MutexLock l(mu_);
    auto it = opened_.find(sink);
    if (it == opened_.end()) return;
    dirty_.push_back(it->second);
  }
  const uint64_t one = 1;
  if (::write(wake_, &one, sizeof one) < 0) {
  }
}

void StreamPump::Stop() {
  {
    MutexLock l(mu_);
    if (stopped_) return;
    stopped_ = true;
  }
  const uint64_t one = 1;
  if (::write(wake_, &one, sizeof one) < 0) {
  }
  if (thread_.joinable()) thread_.join();
}

void StreamPump::Watch(StreamSink& s, bool out) {
  if (s.want_out_ == out) return;
  s.want_out_ = out;
  epoll_event ev{};
  ev.events = EPOLLIN | EPOLLRDHUP | (out ? EPOLLOUT : 0u);
  ev.data.fd = s.fd_;
  ::epoll_ctl(epoll_, EPOLL_CTL_MOD, s.fd_, &ev);
}

void StreamPump::Loop() {
  std::vector<epoll_event> events(256);
  std::vector<std::shared_ptr<StreamSink>> dirty;
  std::vector<Attaching> attach;
  int64_t swept = NowMs();
  while (true) {
    const int n = ::epoll_wait(epoll_, events.data(), static_cast<int>(events.size()), kSweepMs);
    for (int i = 0; i < n; ++i) {
      if (events[i].data.fd == -1) {
        uint64_t v;
        if (::read(wake_, &v, sizeof v) < 0) {
        }
        continue;
      }
      auto it = by_fd_.find(events[i].data.fd);
      if (it == by_fd_.end()) continue;
      std::shared_ptr<StreamSink> s = it->second;
      const uint32_t e = events[i].events;
      if ((e & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR)) && !Discard(*s)) {
        Close(s, false);
        continue;
      }
      Flush(s);
    }
    bool stopping;
    {
      MutexLock l(mu_);
      stopping = stopped_;
      dirty.swap(dirty_);
      attach.swap(attach_);
    }
    for (auto& [s, fd, ssl] : attach) {
      s->fd_ = fd;
      s->ssl_ = ssl;
      epoll_event ev{};
      ev.events = EPOLLIN | EPOLLRDHUP;
      ev.data.fd = s->fd_;
      if (::epoll_ctl(epoll_, EPOLL_CTL_ADD, s->fd_, &ev) != 0) {
        Close(s, false);
        continue;
      }
      by_fd_[s->fd_] = s;
      Flush(s);
    }
    for (auto& s : dirty) {
      {
        MutexLock l(s->mu_);
        s->dirty_ = false;
      }
      if (s->fd_ >= 0) Flush(s);  // not attached yet: Attach flushes it
    }
    attach.clear();
    dirty.clear();
    if (stopping) break;
    if (const int64_t now = NowMs(); now - swept >= kSweepMs) {
      swept = now;
      Sweep(now);
    }
  }
  // Stopping: every stream ends here, attached or not (a sink whose connection never comes is
  // ended so that its producer lets go).
  std::vector<std::shared_ptr<StreamSink>> left;
  {
    MutexLock l(mu_);
    for (auto& [p, s] : opened_) left.push_back(s);
  }
  for (auto& s : left) Close(s, false);
}

// Reads and throws away what the client sends after its request: false once it has closed (or
// sent more than a streaming client has reason to).
bool StreamPump::Discard(StreamSink& s) {
  char buf[4096];
  while (true) {
    if (s.ssl_) {
      ERR_clear_error();
      const int r = SSL_read(s.ssl_, buf, sizeof buf);
      if (r <= 0) {
        const int e = SSL_get_error(s.ssl_, r);
        return e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE;
      }
      s.discarded_ += static_cast<size_t>(r);
    } else {
      const ssize_t r = ::recv(s.fd_, buf, sizeof buf, MSG_DONTWAIT);
      if (r == 0) return false;
      if (r < 0) return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR;
      s.discarded_ += static_cast<size_t>(r);
    }
    if (s.discarded_ > kMaxDiscarded) return false;
  }
}

void StreamPump::Flush(const std::shared_ptr<StreamSink>& s) {
  if (s->fd_ < 0) return;
  while (true) {
    StreamSink::Chunk chunk;
    size_t off = 0;
    {
      MutexLock l(s->mu_);
      if (s->dropped_) {
        l.Unlock();
        stats_->dropped_slow++;
        return Close(s, false);
      }
      if (s->queue_.empty()) {
        const bool done = s->finished_;
        l.Unlock();
        if (done) return Close(s, true);
        return Watch(*s, false);
      }
      chunk = s->queue_.front();
      off = s->front_off_;
    }
    const ssize_t n = WriteSome(s->fd_, s->ssl_, chunk->data() + off, chunk->size() - off);
    if (n < 0) return Close(s, false);
    if (n == 0) return Watch(*s, true);
    MutexLock l(s->mu_);
    s->progress_at_ = NowMs();
    s->buffered_ -= static_cast<size_t>(n);
    s->front_off_ += static_cast<size_t>(n);
    if (s->front_off_ == chunk->size()) {
      s->queue_.pop_front();
      s->front_off_ = 0;
    }
  }
}

// Keep-alive comments on quiet event streams; streams whose client stopped reading are dropped.
void StreamPump::Sweep(int64_t now) {
  static const StreamSink::Chunk kKeepAlive = StreamSink::Frame(": keep-alive\n\n");
  std::vector<std::shared_ptr<StreamSink>> stalled, quiet;
  for (auto& [fd, s] : by_fd_) {
    MutexLock l(s->mu_);
    if (s->buffered_ > 0 && now - s->progress_at_ >= limits_.write_timeout) {
      stalled.push_back(s);
    } else if (s->sse_ && !s->ended_ && s->buffered_ == 0 &&
               now - s->sent_at_ >= limits_.keepalive) {
      quiet.push_back(s);
    }
  }
  for (auto& s : stalled) {
    stats_->dropped_slow++;
    Close(s, false);
  }
  for (auto& s : quiet) s->Write(kKeepAlive);
}

void StreamPump::Close(const std::shared_ptr<StreamSink>& s, bool graceful) {
  {
    MutexLock l(s->mu_);
    s->ended_ = true;
    s->queue_.clear();
    s->buffered_ = 0;
  }
  const bool attached = s->fd_ >= 0;
  if (attached) {
    by_fd_.erase(s->fd_);
    ::epoll_ctl(epoll_, EPOLL_CTL_DEL, s->fd_, nullptr);
    if (s->ssl_) {
      if (graceful) {
        ERR_clear_error();
        SSL_shutdown(s->ssl_);  // close_notify, without waiting for the client's
      }
      SSL_free(s->ssl_);
      ERR_clear_error();
      s->ssl_ = nullptr;
    }
    ::shutdown(s->fd_, SHUT_RDWR);
    ::close(s->fd_);
    s->fd_ = -1;
  }
  {
    MutexLock l(mu_);
    if (opened_.erase(s.get()) > 0) {
      auto it = per_client_.find(s->client_);
      if (it != per_client_.end() && --it->second <= 0) per_client_.erase(it);
    }
    stats_->open = static_cast<int64_t>(opened_.size());
  }
  if (attached) released_(s->client_);
}

}  // namespace hangar::controller
