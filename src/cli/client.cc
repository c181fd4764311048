#include "cli/client.h"

#include <httplib.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <random>
#include <thread>

#include "common/dev_token.h"

namespace hangar::cli {

std::string DefaultServer() {
  const char* env = std::getenv("HANGAR_URL");
  return env && *env ? env : "http://127.0.0.1:8080";
}

namespace {
std::string WithScheme(const std::string& s) {
  return s.find("://") == std::string::npos ? "http://" + s : s;
}
}  // namespace

ApiClient::ApiClient(std::string server) {
  if (server.empty()) server = DefaultServer();
  size_t start = 0;
  while (start <= server.size()) {
    size_t comma = server.find(',', start);
    if (comma == std::string::npos) comma = server.size();
    if (comma > start) servers_.push_back(WithScheme(server.substr(start, comma - start)));
    start = comma + 1;
  }
  if (servers_.empty()) servers_.push_back(WithScheme(DefaultServer()));
  server_ = servers_[0];
}

std::string TokenFor(const std::string& server) {
  // RBAC: $HANGAR_TOKEN, or the file named by $HANGAR_TOKEN_FILE; else, for a loopback address,
  // the token of the `hangar dev` this account runs there.
  std::string token;
  if (const char* t = std::getenv("HANGAR_TOKEN"); t && *t) {
    token = t;
  } else if (const char* f = std::getenv("HANGAR_TOKEN_FILE"); f && *f) {
    std::ifstream in(f);
    std::getline(in, token);
  } else if (auto dev = dev_token::FindForServer(server)) {
    token = *dev;
  }
  return token;
}

namespace {
httplib::Client Make(const std::string& server) {
  httplib::Client c(server);
  if (server.rfind("https://", 0) == 0) {
    // The cluster's own CA (`hangar certs`), else the system's.
    if (const char* ca = std::getenv("HANGAR_CA"); ca && *ca) c.set_ca_cert_path(ca);
    c.enable_server_certificate_verification(true);
  }
  c.set_connection_timeout(5, 0);
  c.set_read_timeout(60, 0);
  c.set_tcp_nodelay(true);
  const std::string token = TokenFor(server);
  if (!token.empty()) c.set_default_headers({{"Authorization", "Bearer " + token}});
  return c;
}
}  // namespace

StatusOr<nlohmann::json> ApiClient::Decode(int status, const std::string& body,
                                           const std::string& what) {
  auto j = nlohmann::json::parse(body, nullptr, false);
  if (status >= 200 && status < 300) {
    if (j.is_discarded())
      return Status::Internal(what + ": the server answered with something that is not JSON");
    return j;
  }
  // A proxy or another server in front may answer {"error": "text"}: its text, not an exception.
  if (!j.is_discarded() && j.is_object() && j.contains("error") && j["error"].is_string()) {
    return Status::Internal(what + ": HTTP " + std::to_string(status) + ": " +
                            j["error"].get<std::string>());
  }
  if (!j.is_discarded() && j.is_object() && j.contains("error") && j["error"].is_object()) {
    const std::string code = j["error"].value("code", "");
    const std::string msg = j["error"].value("message", "");
    StatusCode c = StatusCode::kInternal;
    for (int i = 0; i <= static_cast<int>(StatusCode::kInternal); ++i) {
      if (StatusCodeName(static_cast<StatusCode>(i)) == code) c = static_cast<StatusCode>(i);
    }
    return Status(c, msg);
  }
  return Status::Internal(what + ": HTTP " + std::to_string(status));
}

// Why no answer came, and what to do.
Status Unreachable(const std::string& server, httplib::Error e) {
  if (e == httplib::Error::SSLServerVerification) {
    return Status::Unavailable("the Hangar API at " + server +
                               " has a certificate no CA you trust signed; pass the "
                               "cluster CA with --ca ca.crt or $HANGAR_CA (docs/operations.md)");
  }
  if (e == httplib::Error::SSLConnection) {
    return Status::Unavailable("no TLS connection to " + server +
                               "; is it an https:// server? (a controller with "
                               "--insecure speaks http://)");
  }
  const bool plain = server.rfind("http://", 0) == 0;
  return Status::Unavailable("cannot reach the Hangar API at " + server + " (" +
                             httplib::to_string(e) +
                             "); is the controller running? Set --server or HANGAR_URL" +
                             (plain ? " (a controller with TLS wants https://)" : ""));
}

httplib::Result ApiClient::ToLeader(const std::function<httplib::Result(httplib::Client&)>& call,
                                    bool resend) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  std::string target = servers_[current_];
  for (size_t tries = 1;; ++tries) {
    auto c = Make(target);
    httplib::Result r = call(c);
    server_ = target;
    const bool standby = r && r->status == 503 && r->get_header_value("X-Hangar-Role") == "standby";
    if (standby && r->has_header("X-Hangar-Leader") && tries < 8) {  // it names the leader
      target = r->get_header_value("X-Hangar-Leader");
      continue;
    }
    // Not sent (no connection), or sent and lost where that is safe to repeat.
    const bool unanswered = !r && (r.error() == httplib::Error::Connection || resend);
    const bool several = servers_.size() > 1;
    if (!(standby || (unanswered && several)) || std::chrono::steady_clock::now() > deadline)
      return r;
    current_ = (current_ + 1) % servers_.size();
    target = servers_[current_];
    if (current_ == 0 || !several) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
}

StatusOr<nlohmann::json> ApiClient::Get(const std::string& path) {
  auto r = ToLeader([&](httplib::Client& c) { return c.Get(path); }, true);
  if (!r) return Unreachable(server_, r.error());
  return Decode(r->status, r->body, "GET " + path);
}

StatusOr<nlohmann::json> ApiClient::Post(const std::string& path, const std::string& body,
                                         const std::string& type) {
  auto r = ToLeader([&](httplib::Client& c) { return c.Post(path, body, type); }, false);
  if (!r) return Unreachable(server_, r.error());
  return Decode(r->status, r->body, "POST " + path);
}

StatusOr<nlohmann::json> ApiClient::PostOnce(const std::string& path, const std::string& body,
                                             const std::string& type, const std::string& key) {
  const httplib::Headers h{{"Idempotency-Key", key}};
  auto post = [&](httplib::Client& c) { return c.Post(path, h, body, type); };
  auto r = ToLeader(post, true);
  if (!r) {
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    r = ToLeader(post, true);
  }
  if (!r) return Unreachable(server_, r.error());
  return Decode(r->status, r->body, "POST " + path);
}

std::string NewIdempotencyKey() {
  std::random_device rd;
  char buf[33];
  for (int i = 0; i < 4; ++i) std::snprintf(buf + 8 * i, 9, "%08x", rd());
  return buf;
}

StatusOr<nlohmann::json> ApiClient::Delete(const std::string& path) {
  auto r = ToLeader([&](httplib::Client& c) { return c.Delete(path); }, false);
  if (!r) return Unreachable(server_, r.error());
  return Decode(r->status, r->body, "DELETE " + path);
}

Status ApiClient::Stream(const std::string& path,
                         const std::function<bool(const char*, size_t)>& sink) {
  int status = 0;
  std::string error_body;
  auto r = ToLeader(
      [&](httplib::Client& c) {
        c.set_read_timeout(3600, 0);
        status = 0;
        error_body.clear();
        return c.Get(
            path, httplib::Headers{},
            [&](const httplib::Response& res) {
              status = res.status;
              return true;
            },
            [&](const char* data, size_t n) {
              if (status >= 300) {
                error_body.append(data, n);
                return true;
              }
              return sink(data, n);
            });
      },
      false);
  if (!r && status == 0) return Unreachable(server_, r.error());
  if (status >= 300) return Decode(status, error_body, "GET " + path).status();
  return Status::Ok();
}

}  // namespace hangar::cli
