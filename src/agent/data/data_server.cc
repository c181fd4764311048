#include "agent/data/data_server.h"

#include <fcntl.h>
#include <httplib.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <limits>

namespace hangar::agent::data {

StatusOr<std::pair<std::string, int>> SplitHostPort(const std::string& address) {
  const size_t colon = address.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == address.size()) {
    return Status::InvalidArgument(
        "data address '" + address +
        "' is not HOST:PORT (e.g. 10.20.0.5:7071, or 127.0.0.1:0 for a free port)");
  }
  std::string host = address.substr(0, colon);
  if (host.size() > 2 && host.front() == '[' && host.back() == ']')
    host = host.substr(1, host.size() - 2);
  int port = 0;
  for (char c : address.substr(colon + 1)) {
    if (c < '0' || c > '9' || port > 65535)
      return Status::InvalidArgument("data address '" + address + "' has a bad port");
    port = port * 10 + (c - '0');
  }
  if (port > 65535) return Status::InvalidArgument("data address '" + address + "' has a bad port");
  return std::make_pair(host, port);
}

namespace {

// A decimal number without sign; false for anything else, or one past int64.
bool ParseOffset(const std::string& text, int64_t* out) {
  if (text.empty() || text.size() > 19) return false;
  int64_t v = 0;
  for (char c : text) {
    if (c < '0' || c > '9') return false;
    if (v > (std::numeric_limits<int64_t>::max() - (c - '0')) / 10) return false;
    v = v * 10 + (c - '0');
  }
  *out = v;
  return true;
}

}  // namespace

RangeAsked ParseRange(const std::string& header, int64_t size) {
  RangeAsked r;
  if (header.empty()) return r;
  r.kind = RangeAsked::kUnsatisfiable;
  if (header.rfind("bytes=", 0) != 0 || size <= 0) return r;
  const std::string spec = header.substr(6);
  const size_t dash = spec.find('-');
  if (dash == std::string::npos || spec.find(',') != std::string::npos) return r;
  const std::string a = spec.substr(0, dash), b = spec.substr(dash + 1);
  int64_t first = 0, last = size - 1;
  if (a.empty()) {  // the last N bytes
    int64_t n = 0;
    if (!ParseOffset(b, &n) || n == 0) return r;
    first = n >= size ? 0 : size - n;
  } else {
    if (!ParseOffset(a, &first) || (!b.empty() && !ParseOffset(b, &last))) return r;
    if (first > last || first >= size) return r;
    last = std::min(last, size - 1);
  }
  r.kind = RangeAsked::kPart;
  r.first = first;
  r.last = last;
  return r;
}

DataServer::DataServer(ObjectCache* cache) : cache_(cache) {}

DataServer::~DataServer() { Stop(); }

void DataServer::SetToken(std::string token) {
  MutexLock l(mu_);
  token_ = std::move(token);
}

bool DataServer::Authorized(const std::string& header) const {
  MutexLock l(mu_);
  if (token_.empty() || header.size() != token_.size() + 7 || header.rfind("Bearer ", 0) != 0)
    return false;
  unsigned char diff = 0;  // in constant time
  for (size_t i = 0; i < token_.size(); ++i)
    diff |= static_cast<unsigned char>(header[7 + i] ^ token_[i]);
  return diff == 0;
}

namespace {

int64_t QueryInt(const httplib::Request& req, const char* key, int64_t fallback) {
  if (!req.has_param(key)) return fallback;
  try {
    return std::stoll(req.get_param_value(key));
  } catch (...) {
    return -1;
  }
}

void Error(httplib::Response& res, int status, const std::string& why) {
  res.status = status;
  res.set_content(why + "\n", "text/plain");
}

}  // namespace

void DataServer::Serve(const httplib::Request& req, httplib::Response& res) {
  if (!Authorized(req.get_header_value("Authorization"))) {
    return Error(
        res, 401,
        "this data port serves the agents of its cluster only: show the controller's data token");
  }
  const std::string digest = req.matches[1];
  const int64_t offset = QueryInt(req, "offset", -2), length = QueryInt(req, "length", -2);
  const int64_t wait_ms = std::clamp<int64_t>(QueryInt(req, "wait_ms", 0), 0, 10000);
  const std::string path = cache_->PathOf(digest);
  if (offset == -2 && length == -2) {  // the whole object, Range honoured
    if (path.empty()) return Error(res, 404, digest + " is not held here");
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return Error(res, 404, digest + " is not held here");
    const int64_t size = ::lseek(fd, 0, SEEK_END);
    auto shared_fd = std::shared_ptr<int>(new int(fd), [](int* f) {
      ::close(*f);
      delete f;
    });
    const RangeAsked range = ParseRange(req.get_header_value("Range"), size);
    // The range is answered here, whole: httplib would otherwise apply its own reading of the
    // header again (and answers a start past the end with 206 and no bytes).
    const_cast<httplib::Request&>(req).ranges.clear();
    if (range.kind == RangeAsked::kUnsatisfiable) {
      res.set_header("Content-Range", "bytes */" + std::to_string(size));
      return Error(
          res, 416,
          "the object has " + std::to_string(size) + " bytes: ask for one range within them");
    }
    const int64_t first = range.kind == RangeAsked::kPart ? range.first : 0;
    const int64_t count = range.kind == RangeAsked::kPart ? range.last - range.first + 1 : size;
    if (range.kind == RangeAsked::kPart) {
      res.status = 206;
      res.set_header("Content-Range", "bytes " + std::to_string(range.first) + "-" +
                                          std::to_string(range.last) + "/" + std::to_string(size));
    }
    res.set_content_provider(
        static_cast<size_t>(count), "application/octet-stream",
        [this, shared_fd, first](size_t off, size_t len, httplib::DataSink& sink) {
          std::string buf(std::min<size_t>(len, 1 << 20), '\0');
          const ssize_t r = ::pread(*shared_fd, buf.data(), buf.size(),
                                    static_cast<off_t>(first + static_cast<int64_t>(off)));
          if (r <= 0) return false;
          bytes_served_ += r;
          return sink.write(buf.data(), static_cast<size_t>(r));
        });
    return;
  }
  if (offset < 0 || length <= 0)
    return Error(res, 400, "offset and length must be non-negative integers (length > 0)");
  if (!path.empty()) {
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return Error(res, 404, digest + " is not held here");
    const int64_t size = ::lseek(fd, 0, SEEK_END);
    if (length > size || offset > size - length) {
      ::close(fd);
      return Error(res, 416, "the object has " + std::to_string(size) + " bytes");
    }
    auto data = ReadAt(fd, offset, length);
    ::close(fd);
    if (!data.ok()) return Error(res, 500, data.status().message());
    bytes_served_ += length;
    return res.set_content(*data, "application/octet-stream");
  }
  std::shared_ptr<Partial> p = cache_->Staging(digest);
  if (!p) return Error(res, 404, digest + " is not held here");
  if (length > p->bytes() || offset > p->bytes() - length)
    return Error(res, 416, "the object has " + std::to_string(p->bytes()) + " bytes");
  const int64_t first = offset / p->chunk_bytes(), last = (offset + length - 1) / p->chunk_bytes();
  if (!p->WaitFor(first, last, wait_ms)) {
    if (p->abandoned()) return Error(res, 404, digest + " is not held here (its staging failed)");
    int64_t held = 0;
    for (int64_t i = 0; i < p->chunks(); ++i) held += p->Has(i);
    res.set_header("X-Hangar-Chunks-Held", std::to_string(held));
    return Error(res, 503, "not here yet: ask again");
  }
  auto data = p->Read(offset, length);
  if (!data.ok()) return Error(res, 500, data.status().message());
  bytes_served_ += length;
  res.set_content(*data, "application/octet-stream");
}

Status DataServer::Start(const std::string& address) {
  HANGAR_ASSIGN_OR_RETURN(auto hp, SplitHostPort(address));
  server_ = std::make_unique<httplib::Server>();
  // Chunk requests wait for bytes in flight: room for every peer's workers at once.
  server_->new_task_queue = [] { return new httplib::ThreadPool(48); };
  server_->set_keep_alive_max_count(100000);
  server_->Get(R"(/v1/objects/(sha256:[0-9a-f]{64}))",
               [this](const httplib::Request& req, httplib::Response& res) { Serve(req, res); });
  int port = hp.second;
  if (port == 0) {
    port = server_->bind_to_any_port(hp.first);
    if (port <= 0) return Status::Unavailable("cannot listen on " + address + " for peers");
  } else if (!server_->bind_to_port(hp.first, port)) {
    return Status::Unavailable("cannot listen on " + address +
                               " for peers (in use, or not this node's address)");
  }
  const bool v6 = hp.first.find(':') != std::string::npos;
  url_ = "http://" + (v6 ? "[" + hp.first + "]" : hp.first) + ":" + std::to_string(port);
  thread_ = std::thread([this] { server_->listen_after_bind(); });
  return Status::Ok();
}

void DataServer::Stop() {
  if (server_) server_->stop();
  if (thread_.joinable()) thread_.join();
}

}  // namespace hangar::agent::data
