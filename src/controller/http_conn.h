// One REST API connection's I/O, for the connection layer in http_server.h: its socket, its TLS
// session, the bytes read ahead of cpp-httplib, and the steps that need no thread -- the TLS
// handshake and the request head are read without blocking, as their bytes come, so that only a
// connection with a whole request head in hand takes a worker. A request line or head over its
// cap is answered here (414, 431) with a sentence, not dropped.
#pragma once

#include <httplib.h>
#include <openssl/ssl.h>

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include "controller/http_server.h"

namespace hangar::controller {

class StreamSink;

int64_t MonotonicMs();
// The numeric address of a socket's peer (`peer`) or its own end, IPv4-mapped IPv6 as IPv4.
std::string SocketAddress(int fd, bool peer, int* port);

struct Conn {
  int fd = -1;
  std::string client;    // the peer's address: the key of the per-client cap
  SSL* ssl = nullptr;    // https: made on the first byte
  bool secured = false;  // the TLS handshake is done
  int served = 0;        // requests so far
  // Where the connection stands while no worker holds it, and until when it may stand there.
  enum class Phase : uint8_t {
    kIdle,   // nothing of a next request yet: idle_timeout
    kHead,   // a request (or its TLS handshake) has begun: header_timeout from its first byte
    kDrain,  // answered with an error and closing: what the client still sends is read and dropped
  };
  Phase phase = Phase::kIdle;
  int64_t deadline = 0;
  bool parked = false;
  std::multimap<int64_t, Conn*>::iterator parked_at;
  // Read ahead of cpp-httplib, which reads request lines and headers a byte at a time: the next
  // request's head (and whatever followed it) from `in_off` on. Emptied while the connection idles.
  std::string in;
  size_t in_off = 0;
  size_t drained = 0;
  // A route took the connection for a stream (HttpServerControl::TakeStream): once the handler
  // returns, the stream pump owns the socket.
  std::shared_ptr<StreamSink> stream;
};

// What a connection waits for next.
enum class ConnStep : uint8_t {
  kServe,      // a whole request head is in `in`: a worker serves it
  kWaitRead,   // readable
  kWaitWrite,  // writable (a TLS handshake's flight did not fit)
  kClose,      // the client closed, or the connection failed or was answered and drained
};

// Takes a connection as far as it goes without blocking: the TLS handshake (`ctx`: https), then
// the request head, up to the caps in `limits`; a connection in kIdle moves to kHead, with the
// header deadline, once a byte arrives.
ConnStep Advance(Conn& c, SSL_CTX* ctx, const HttpLimits& limits, HttpConnStats& stats);

// Whether bytes of a next request are already in hand (in `in`, or in OpenSSL's buffer).
bool Buffered(const Conn& c);

// One connection as cpp-httplib's Stream for one request whose head is in `in`, on a non-blocking
// socket: a body's reads wait with poll() up to the body deadline, writes up to the write timeout.
class ConnStream final : public httplib::Stream {
 public:
  ConnStream(Conn& c, const HttpLimits& limits, HttpConnStats& stats)
      : c_(c), limits_(limits), stats_(stats) {}

  // A request starts: its head is in `in`.
  void BeginRequest();
  // The stream refused to go on (a deadline or the header cap): the connection must close.
  bool failed() const { return failed_; }

  bool is_readable() const override;
  bool is_writable() const override;
  ssize_t read(char* ptr, size_t size) override;
  ssize_t write(const char* ptr, size_t size) override;
  void get_remote_ip_and_port(std::string& ip, int& port) const override {
    ip = SocketAddress(c_.fd, true, &port);
  }
  void get_local_ip_and_port(std::string& ip, int& port) const override {
    ip = SocketAddress(c_.fd, false, &port);
  }
  socket_t socket() const override { return c_.fd; }

 private:
  int64_t ReadDeadline() const;
  ssize_t Fill(int64_t deadline);
  ssize_t TimedOut();
  ssize_t Account(const char* p, size_t n);

  Conn& c_;
  const HttpLimits& limits_;
  HttpConnStats& stats_;
  bool in_headers_ = true;
  bool failed_ = false;
  size_t header_bytes_ = 0;
  uint32_t tail_ = 0;
  int64_t header_deadline_ = 0, body_deadline_ = INT64_MAX;
};

}  // namespace hangar::controller
