// RequestGuard: what every REST request must pass before it is routed (and before its body is
// read), so that a web page the user happens to have open cannot drive the API:
//   - Host, when the API is told which names it answers to (`hangar dev`: 127.0.0.1:PORT,
//     localhost:PORT and [::1]:PORT): any other name is refused (421), which defeats DNS
//     rebinding;
//   - Origin, when a browser sends one: on every call that may change something (and, with a dev
//     token, on every call) it must be this API's own origin (403);
//   - Content-Type of a call that may change something: JSON or YAML only (415), so that no HTML
//     form and no "simple" cross-origin request (text/plain) carries a job;
//   - with a dev token (`--auth dev`, which `hangar dev` uses): every call but the dashboard's
//     files, /healthz and /metrics must carry `Authorization: Bearer <token>` (401).
// Thread-safe once configured: Check is const and reads only what Configure set.
#pragma once

#include <httplib.h>

#include <optional>
#include <string>
#include <vector>

#include "common/status.h"

namespace hangar::controller {

struct RequestGuardOptions {
  // Non-empty: the one token `--auth dev` accepts (`hangar dev`'s per-run token).
  std::string dev_token;
  std::string dev_token_file;  // where it is, for the sentence of a refusal
  // Host header values the API answers to, as "name" or "name:port". Empty: any (no check).
  std::vector<std::string> hosts;
  // Also the loopback names with the bound port (127.0.0.1:P, localhost:P, [::1]:P).
  bool loopback_hosts = false;
  bool tls = false;  // the scheme of this API's own origin
};

class RequestGuard {
 public:
  struct Refusal {
    int http_status;
    Status why;
  };

  RequestGuard() = default;
  explicit RequestGuard(RequestGuardOptions options) : options_(std::move(options)) {}
  // Completes the hosts with the port the API is bound to. Call before serving.
  void Bind(int port);

  // Why `req` is refused, or nullopt when it may be routed.
  std::optional<Refusal> Check(const httplib::Request& req) const;
  // Whether `req` carries the dev token (false without one configured).
  bool HoldsDevToken(const httplib::Request& req) const;
  bool dev_mode() const { return !options_.dev_token.empty(); }

  // "application/json; charset=utf-8" -> true; text/plain, forms, anything else -> false.
  static bool IsJsonOrYaml(std::string_view content_type);

 private:
  std::optional<Refusal> CheckHost(const httplib::Request& req) const;
  std::optional<Refusal> CheckOrigin(const httplib::Request& req, bool mutating) const;
  std::optional<Refusal> CheckContentType(const httplib::Request& req) const;
  std::optional<Refusal> CheckDevToken(const httplib::Request& req) const;
  bool HostAllowed(std::string_view host) const;

  RequestGuardOptions options_;
  std::vector<std::string> hosts_;  // lower case; set by Bind
};

}  // namespace hangar::controller
