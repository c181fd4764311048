// An agent's data port (docs/data.md): serves the objects of its artifact cache to
// other agents over HTTP, on the node's data-network address (--data-address), never on the
// management one. Whole objects honour Range requests; `?offset=&length=` asks for bytes that
// may still be arriving and waits (up to `wait_ms`, at most 10 s) for them, so that chunks pass
// down a fan-out tree while they are being downloaded. Every request shows the token the
// controller gave this node's agents (Authorization: Bearer).
//
//   GET /v1/objects/sha256:<hex>                        the object (Range: bytes=a-b honoured;
//                                                       416 for a range it does not hold)
//   GET /v1/objects/sha256:<hex>?offset=O&length=L&wait_ms=W
//     200: those bytes; 503 + X-Hangar-Chunks-Held: not there yet, ask again; 404: not held here
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <thread>

#include "agent/data/object_cache.h"
#include "common/mutex.h"
#include "common/status.h"

namespace httplib {
class Server;
struct Request;
struct Response;
}  // namespace httplib

namespace hangar::agent::data {

class DataServer {
 public:
  explicit DataServer(ObjectCache* cache);
  ~DataServer();
  // Listens on HOST:PORT (PORT 0: a free one) and serves on a thread of its own.
  Status Start(const std::string& address);
  void Stop();
  // http://HOST:PORT, once started.
  std::string url() const { return url_; }
  void SetToken(std::string token) HANGAR_EXCLUDES(mu_);
  int64_t bytes_served() const { return bytes_served_; }

 private:
  bool Authorized(const std::string& header) const HANGAR_EXCLUDES(mu_);
  void Serve(const httplib::Request& req, httplib::Response& res) HANGAR_EXCLUDES(mu_);
  ObjectCache* cache_;
  std::unique_ptr<httplib::Server> server_;
  std::thread thread_;
  std::string url_;
  mutable Mutex mu_;
  std::string token_ HANGAR_GUARDED_BY(mu_);
  std::atomic<int64_t> bytes_served_{0};
};

// What a Range header asks of an object of `size` bytes: the whole object (no header), bytes
// [first, last] (one range: "bytes=A-B", "bytes=A-", "bytes=-N"; B past the end is cut to it), or
// nothing this object can give (a start past the end, a malformed or overflowing number, several
// ranges): 416 with "Content-Range: bytes */SIZE".
struct RangeAsked {
  enum Kind { kWhole, kPart, kUnsatisfiable } kind = kWhole;
  int64_t first = 0, last = 0;
};
RangeAsked ParseRange(const std::string& header, int64_t size);

// "HOST:PORT" (or "[v6]:PORT") split; the error says the form.
StatusOr<std::pair<std::string, int>> SplitHostPort(const std::string& address);

}  // namespace hangar::agent::data
