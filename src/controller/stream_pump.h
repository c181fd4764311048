// Long-lived responses (the dashboard's live feed, `logs -f`) without a thread each. A route hands
// its connection to the pump and its worker goes back to the pool; producers queue the body's
// chunks on the stream's StreamSink from any thread, and one pump thread writes them to the
// non-blocking sockets (through OpenSSL for https), notices clients that leave, sends keep-alive
// comments on quiet server-sent-event streams, and drops a client that does not keep up: queued
// bytes are capped per stream, and bytes that make no progress for the write timeout end it.
#pragma once

#include <openssl/ssl.h>

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <vector>

#include "common/mutex.h"
#include "common/status.h"
#include "common/time.h"

namespace hangar::controller {

struct StreamLimits {
  int max_streams = 3072;                 // open streams in all
  int max_streams_per_client = 128;       // from one client address
  size_t max_buffered_bytes = 4u << 20;   // queued for one client and not yet written
  Duration write_timeout = 10 * kSecond;  // queued bytes that make no progress for this long
  Duration keepalive = 15 * kSecond;      // a quiet event stream gets a comment this often
};

// What the pump counted; the connection layer exports them (hangar_http_streams_*).
struct StreamStats {
  std::atomic<int64_t> open{0};
  std::atomic<int64_t> opened{0};
  std::atomic<int64_t> refused{0};       // over a cap
  std::atomic<int64_t> dropped_slow{0};  // a reader that did not keep up
};

class StreamPump;

// A streaming response's body as HTTP/1.1 chunks, shared by its producer and the pump.
// Thread-safe.
class StreamSink {
 public:
  // One framed chunk: made once, shared by every stream that sends the same bytes.
  using Chunk = std::shared_ptr<const std::string>;
  static Chunk Frame(std::string_view data);

  // Queues a chunk; false once the stream has ended (the client left, did not keep up, or the
  // server stops): the producer forgets the stream then.
  bool Write(Chunk chunk);
  bool Write(std::string_view data) { return data.empty() ? open() : Write(Frame(data)); }
  // Ends the body after what is queued; the connection is closed once that is written.
  void Finish();
  bool open() const;
  // Bytes queued and not yet written.
  size_t buffered() const;
  const std::string& client() const { return client_; }

 private:
  friend class StreamPump;
  StreamSink(StreamPump* pump, std::string client, bool sse)
      : pump_(pump), client_(std::move(client)), sse_(sse) {}

  StreamPump* const pump_;
  const std::string client_;
  const bool sse_;
  mutable Mutex mu_;
  std::deque<Chunk> queue_ HANGAR_GUARDED_BY(mu_);
  size_t front_off_ HANGAR_GUARDED_BY(mu_) = 0;  // of queue_.front(), written already
  size_t buffered_ HANGAR_GUARDED_BY(mu_) = 0;
  bool ended_ HANGAR_GUARDED_BY(mu_) = false;     // no more writes: finished, dropped or closed
  bool finished_ HANGAR_GUARDED_BY(mu_) = false;  // Finish(): close once the queue is written
  bool dropped_ HANGAR_GUARDED_BY(mu_) =
      false;  // over the cap: the pump closes it without writing the rest
  bool dirty_ HANGAR_GUARDED_BY(mu_) = false;  // on the pump's list of streams to write
  int64_t progress_at_ HANGAR_GUARDED_BY(mu_) =
      0;  // the last write that made progress, or the queue's start
  int64_t sent_at_ HANGAR_GUARDED_BY(mu_) = 0;  // the last chunk queued (for keep-alives)
  // The pump thread's own.
  int fd_ = -1;
  SSL* ssl_ = nullptr;
  bool want_out_ = false;  // registered for EPOLLOUT
  size_t discarded_ = 0;   // bytes the client sent after its request
};

class StreamPump {
 public:
  // `released(client)` runs on the pump's thread each time it closes a stream's connection.
  StreamPump(const StreamLimits& limits, StreamStats* stats,
             std::function<void(const std::string&)> released);
  ~StreamPump();
  StreamPump(const StreamPump&) = delete;
  StreamPump& operator=(const StreamPump&) = delete;

  // A place for a stream from `client` under the caps: its sink, with `head` (the response's
  // status line and headers) queued first; or Unavailable, with a sentence, when over a cap.
  StatusOr<std::shared_ptr<StreamSink>> Open(const std::string& client, std::string head, bool sse);
  // The connection of a sink from Open: `fd` non-blocking, `ssl` (or null) with its handshake
  // done. The pump owns both from here, and closes them.
  void Attach(const std::shared_ptr<StreamSink>& sink, int fd, SSL* ssl);
  // Closes every stream and ends the thread; Open refuses from then on.
  void Stop();

 private:
  friend class StreamSink;
  void Notify(StreamSink* sink) HANGAR_REQUIRES(sink->mu_);
  void Loop();
  void Flush(const std::shared_ptr<StreamSink>& s);
  bool Discard(StreamSink& s);
  void Sweep(int64_t now);
  void Close(const std::shared_ptr<StreamSink>& s, bool graceful);
  void Watch(StreamSink& s, bool out);

  const StreamLimits limits_;
  StreamStats* const stats_;
  const std::function<void(const std::string&)> released_;
  int epoll_ = -1, wake_ = -1;

  Mutex mu_;
  bool stopped_ HANGAR_GUARDED_BY(mu_) = false;
  struct Attaching {
    std::shared_ptr<StreamSink> sink;
    int fd;
    SSL* ssl;
  };
  std::vector<std::shared_ptr<StreamSink>> dirty_ HANGAR_GUARDED_BY(mu_);
  std::vector<Attaching> attach_ HANGAR_GUARDED_BY(mu_);
  std::unordered_map<StreamSink*, std::shared_ptr<StreamSink>> opened_
      HANGAR_GUARDED_BY(mu_);  // from Open until closed
  std::unordered_map<std::string, int> per_client_ HANGAR_GUARDED_BY(mu_);

  std::unordered_map<int, std::shared_ptr<StreamSink>> by_fd_;  // the pump thread's own
  std::thread thread_;
};

}  // namespace hangar::controller
