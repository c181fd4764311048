// The REST API's connection handling. cpp-httplib keeps parsing, routing and writing responses;
// Hangar owns what happens between accept() and process_request():
//   - an idle connection (new, or between keep-alive requests) costs a file descriptor and a slot
//     in one epoll set (the parker), not a thread: slowloris, thousands of idle sockets or
//     keep-alive clients cannot take the workers;
//   - the parker also does the TLS handshake and reads the request head, without blocking, as
//     their bytes come (http_conn.h): only a connection with a whole request head in hand gets a
//     worker, so slow handshakes and slow headers hold no thread;
//   - a request gets a thread of its own from an elastic pool (threads start when every one is
//     busy and end after a while idle);
//   - a long-lived response (the dashboard's live feed, `logs -f`) holds no thread at all: its
//     route takes the connection for a stream (TakeStream) and the stream pump writes it;
//   - the TLS handshake, request line and headers must arrive within the header timeout of the
//     first byte and stay under size caps (a request line over its cap is answered 414, headers
//     over theirs 431); a body within the body timeout of the headers;
//   - caps on open connections, in total and from one client address: a connection over a cap
//     is answered 503 with a sentence (plaintext) or closed (TLS) at once, and counted; so are
//     streams, by their own caps.
// The same for http:// (httplib::Server) and https:// (httplib::SSLServer).
#pragma once

#include <httplib.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "common/status.h"
#include "common/time.h"
#include "common/tls_files.h"
#include "controller/stream_pump.h"

namespace hangar::controller {

struct HttpLimits {
  int max_connections = 4096;            // open connections, idle or in a request
  int max_connections_per_client = 256;  // from one client IP address
  Duration header_timeout =
      10 * kSecond;  // TLS handshake, request line and headers, from the first byte
  Duration idle_timeout = 10 * kSecond;      // a connection with no request under way is closed
  Duration body_timeout = 60 * kSecond;      // the whole body, from the end of the headers
  Duration read_timeout = 5 * kSecond;       // a body read that makes no progress
  Duration write_timeout = 10 * kSecond;     // a response write that makes no progress
  size_t max_header_bytes = 64 * 1024;       // request line and headers: more is answered 431
  size_t max_request_line_bytes = 8 * 1024;  // method, target and version: more is answered 414
  int max_requests_per_connection = 1000;    // keep-alive requests before the server closes
  int max_workers = 1024;                    // requests served at once (one thread each)
  // 8 MiB, as glibc's default: libstdc++'s std::regex recurses per character, and cpp-httplib
  // matches routes (and Range headers) with it against inputs of up to 8 KiB (~4 MiB of stack).
  // Virtual memory: a worker's resident stack is the few pages it touches.
  size_t worker_stack_bytes = 8u << 20;
  StreamLimits streams;  // live feeds and log follows (the stream pump)
};

// What the connection layer counted; exported on /metrics (hangar_http_*).
struct HttpConnStats {
  std::atomic<int64_t> open{0};       // connections open now
  std::atomic<int64_t> in_flight{0};  // requests being served now
  std::atomic<int64_t> workers{0};    // worker threads now
  std::atomic<int64_t> accepted{0};
  std::atomic<int64_t> refused_total_cap{0};   // over max_connections
  std::atomic<int64_t> refused_client_cap{0};  // over max_connections_per_client
  std::atomic<int64_t> refused_no_thread{0};   // no worker thread could be started
  std::atomic<int64_t> header_timeouts{0};     // handshake or headers too slow (slowloris)
  std::atomic<int64_t> headers_too_large{0};   // answered 431
  std::atomic<int64_t> uri_too_long{0};        // answered 414
  std::atomic<int64_t> body_timeouts{0};       // a body too slow, or stalled
  std::atomic<int64_t> idle_closed{0};         // idle past idle_timeout
  StreamStats streams;
};

// How a stream's response begins: 200, `content_type`, chunked, and closed when it ends.
struct StreamHead {
  std::string content_type;
  bool server_sent_events = false;  // the pump sends keep-alive comments while it is quiet
  std::vector<std::pair<std::string, std::string>> headers;  // more headers
};

// The server's control, beside the httplib::Server that routes are added to.
class HttpServerControl {
 public:
  virtual ~HttpServerControl() = default;
  // Binds (port 0: any free port) with a listen backlog of `backlog`; the port, or -1.
  virtual int Bind(const std::string& host, int port, int backlog) = 0;
  virtual const HttpConnStats& stats() const = 0;
  // From inside a route's handler, on its thread: the request's connection leaves the worker when
  // the handler returns, and the stream pump writes the response -- `head`, then what is written
  // to the sink (from any thread) -- until the sink is finished or the client leaves; the
  // handler's `res` is not sent. Unavailable, with a sentence, over the stream caps (answer it as
  // usual); Internal when not called from a handler.
  virtual StatusOr<std::shared_ptr<StreamSink>> TakeStream(const StreamHead& head) = 0;
};

struct HttpServer {
  std::unique_ptr<httplib::Server> server;  // add routes here; listen_after_bind() serves
  HttpServerControl* control = nullptr;     // the same object
};

// `tls` empty: http://; else https:// with its certificate and key (check server->is_valid()).
HttpServer MakeHttpServer(const TlsFiles& tls, const HttpLimits& limits);

}  // namespace hangar::controller
