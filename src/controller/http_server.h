// The REST API's connection handling (issue 16, "limits against hostile clients"). cpp-httplib
// keeps parsing, routing and writing responses; Hangar owns what happens between accept() and
// process_request():
//   - an idle connection (new, or between keep-alive requests) costs a file descriptor and a slot
//     in one epoll set, not a thread: slowloris, thousands of idle sockets or keep-alive clients
//     cannot take the workers;
//   - a request gets a thread of its own from an elastic pool (threads start when every one is
//     busy and end after a while idle), so a long-lived response (`logs -f`) holds one thread
//     and no one else's request waits behind it;
//   - the TLS handshake, request line and headers must arrive within the header timeout of the
//     first byte and stay under a size cap; a body within the body timeout of the headers;
//   - caps on open connections, in total and from one client address: a connection over a cap
//     is answered 503 with a sentence (plaintext) or closed (TLS) at once, and counted.
// The same for http:// (httplib::Server) and https:// (httplib::SSLServer).
#pragma once

#include <httplib.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "common/time.h"
#include "common/tls_files.h"

namespace hangar::controller {

struct HttpLimits {
  int max_connections = 4096;             // open connections, idle or in a request
  int max_connections_per_client = 256;   // from one client IP address
  Duration header_timeout = 10 * kSecond;  // TLS handshake, request line and headers, from the first byte
  Duration idle_timeout = 10 * kSecond;    // a connection with no request under way is closed
  Duration body_timeout = 60 * kSecond;    // the whole body, from the end of the headers
  Duration read_timeout = 5 * kSecond;     // a body read that makes no progress
  Duration write_timeout = 10 * kSecond;   // a response write that makes no progress
  size_t max_header_bytes = 64 * 1024;     // request line and headers
  int max_requests_per_connection = 1000;  // keep-alive requests before the server closes
  int max_workers = 1024;                  // requests served at once (one thread each)
  // 8 MiB, as glibc's default: libstdc++'s std::regex recurses per character, and cpp-httplib
  // matches routes (and Range headers) with it against inputs of up to 8 KiB (~4 MiB of stack).
  // Virtual memory: a worker's resident stack is the few pages it touches.
  size_t worker_stack_bytes = 8u << 20;
};

// What the connection layer counted; exported on /metrics (hangar_http_*).
struct HttpConnStats {
  std::atomic<int64_t> open{0};             // connections open now
  std::atomic<int64_t> in_flight{0};        // requests being served now
  std::atomic<int64_t> workers{0};          // worker threads now
  std::atomic<int64_t> accepted{0};
  std::atomic<int64_t> refused_total_cap{0};   // over max_connections
  std::atomic<int64_t> refused_client_cap{0};  // over max_connections_per_client
  std::atomic<int64_t> refused_no_thread{0};   // no worker thread could be started
  std::atomic<int64_t> header_timeouts{0};     // handshake or headers too slow (slowloris)
  std::atomic<int64_t> headers_too_large{0};
  std::atomic<int64_t> body_timeouts{0};       // a body too slow, or stalled
  std::atomic<int64_t> idle_closed{0};         // idle past idle_timeout
};

// The server's control, beside the httplib::Server that routes are added to.
class HttpServerControl {
 public:
  virtual ~HttpServerControl() = default;
  // Binds (port 0: any free port) with a listen backlog of `backlog`; the port, or -1.
  virtual int Bind(const std::string& host, int port, int backlog) = 0;
  virtual const HttpConnStats& stats() const = 0;
};

struct HttpServer {
  std::unique_ptr<httplib::Server> server;  // add routes here; listen_after_bind() serves
  HttpServerControl* control = nullptr;     // the same object
};

// `tls` empty: http://; else https:// with its certificate and key (check server->is_valid()).
HttpServer MakeHttpServer(const TlsFiles& tls, const HttpLimits& limits);

}  // namespace hangar::controller
