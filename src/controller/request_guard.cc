#include "controller/request_guard.h"

#include <openssl/crypto.h>

#include <algorithm>
#include <cctype>

namespace hangar::controller {
namespace {

std::string Lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return std::tolower(c); });
  return out;
}

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

bool Mutating(const std::string& method) {
  return method != "GET" && method != "HEAD" && method != "OPTIONS";
}

// What the dashboard's page, the health check and Prometheus read without a token in dev mode.
bool OpenRead(const httplib::Request& req) {
  if (req.method != "GET" && req.method != "HEAD") return false;
  const std::string& p = req.path;
  return p == "/" || p.rfind("/ui/", 0) == 0 || p == "/healthz" || p == "/metrics";
}

// A body follows the headers (cpp-httplib reads it only after routing).
bool HasBody(const httplib::Request& req) {
  if (req.has_header("Transfer-Encoding")) return true;
  if (!req.has_header("Content-Length")) return false;
  const std::string n = req.get_header_value("Content-Length");
  return !n.empty() && n.find_first_not_of('0') != std::string::npos;
}

RequestGuard::Refusal Refuse(int http_status, Status why) { return {http_status, std::move(why)}; }

}  // namespace

bool RequestGuard::IsJsonOrYaml(std::string_view content_type) {
  const std::string type = Lower(Trim(content_type.substr(0, content_type.find(';'))));
  return type == "application/json" || type == "application/yaml" || type == "application/x-yaml" ||
         type == "text/yaml";
}

void RequestGuard::Bind(int port) {
  hosts_.clear();
  const std::string p = std::to_string(port);
  for (const std::string& h : options_.hosts) {
    if (h.empty()) continue;
    const std::string host = Lower(h);
    hosts_.push_back(host);
    // A name without a port also answers with the bound port.
    const bool has_port = host.front() == '[' ? host.find("]:") != std::string::npos
                                              : host.find(':') != std::string::npos;
    if (!has_port) hosts_.push_back(host + ":" + p);
  }
  if (options_.loopback_hosts) {
    // Clients leave the scheme's own port out of Host.
    const bool default_port = port == (options_.tls ? 443 : 80);
    for (const char* name : {"127.0.0.1", "localhost", "[::1]"}) {
      hosts_.push_back(std::string(name) + ":" + p);
      if (default_port) hosts_.push_back(name);
    }
  }
}

bool RequestGuard::HostAllowed(std::string_view host) const {
  const std::string h = Lower(host);
  return std::find(hosts_.begin(), hosts_.end(), h) != hosts_.end();
}

std::optional<RequestGuard::Refusal> RequestGuard::CheckHost(const httplib::Request& req) const {
  if (hosts_.empty()) return std::nullopt;
  const size_t n = req.get_header_value_count("Host");
  const std::string host = n == 1 ? req.get_header_value("Host") : "";
  if (n == 1 && HostAllowed(host)) return std::nullopt;
  std::string names;
  for (size_t i = 0; i < hosts_.size(); ++i)
    names += (i ? (i + 1 == hosts_.size() ? " or " : ", ") : "") + hosts_[i];
  const std::string given = n == 0  ? "no Host header"
                            : n > 1 ? "several Host headers"
                                    : "Host '" + host + "'";
  return Refuse(421, Status::PermissionDenied("this API answers to " + names + ", not to " + given +
                                              "; call it by one of those names (a web page that "
                                              "points another name at this address is refused)"));
}

std::optional<RequestGuard::Refusal> RequestGuard::CheckOrigin(const httplib::Request& req,
                                                               bool mutating) const {
  const size_t n = req.get_header_value_count("Origin");
  if (n == 0 || (!mutating && !dev_mode())) return std::nullopt;
  // The page's scheme is not compared: a proxy may end TLS in front of this API, and one
  // host:port serves one scheme.
  const std::string origin = Lower(req.get_header_value("Origin"));
  const size_t sep = origin.find("://");
  const std::string scheme = sep == std::string::npos ? "" : origin.substr(0, sep);
  const std::string authority = sep == std::string::npos ? "" : origin.substr(sep + 3);
  const std::string host = Lower(req.get_header_value("Host"));
  const bool web = scheme == "http" || scheme == "https";
  if (n == 1 && web && !authority.empty() && (authority == host || HostAllowed(authority)))
    return std::nullopt;
  const std::string own = (options_.tls ? "https://" : "http://") + host;
  return Refuse(403, Status::PermissionDenied(
                         "a web page of another origin (Origin '" + req.get_header_value("Origin") +
                         "') may not call this API; only its own pages (" + own +
                         ") and programs that send no Origin (the CLI, curl) may"));
}

std::optional<RequestGuard::Refusal> RequestGuard::CheckContentType(
    const httplib::Request& req) const {
  const bool typed = req.has_header("Content-Type");
  if (!typed && !HasBody(req)) return std::nullopt;
  const std::string type = typed ? req.get_header_value("Content-Type") : "";
  if (typed && IsJsonOrYaml(type)) return std::nullopt;
  return Refuse(415, Status::InvalidArgument(
                         (typed ? "Content-Type '" + type + "' is not one this API takes"
                                : std::string("a body without a Content-Type is not taken")) +
                         ": send JSON (application/json) or YAML (application/yaml), e.g. "
                         "curl -H 'Content-Type: application/yaml' --data-binary @job.yaml"));
}

bool RequestGuard::HoldsDevToken(const httplib::Request& req) const {
  if (!dev_mode() || !req.has_header("Authorization")) return false;
  const std::string header = req.get_header_value("Authorization");
  std::string_view given = Trim(header);
  if (given.size() < 7 || Lower(given.substr(0, 7)) != "bearer ") return false;
  given = Trim(given.substr(7));
  const std::string& want = options_.dev_token;
  return given.size() == want.size() && CRYPTO_memcmp(given.data(), want.data(), want.size()) == 0;
}

std::optional<RequestGuard::Refusal> RequestGuard::CheckDevToken(
    const httplib::Request& req) const {
  if (!dev_mode() || OpenRead(req) || HoldsDevToken(req)) return std::nullopt;
  const std::string file =
      options_.dev_token_file.empty() ? "the dev folder's dev-token" : options_.dev_token_file;
  return Refuse(
      401,
      Status::Unauthenticated(
          std::string(req.has_header("Authorization")
                          ? "that is not this `hangar dev` cluster's token (it makes a new one "
                            "at each start; a $HANGAR_TOKEN or $HANGAR_TOKEN_FILE of yours "
                            "comes first: unset them)"
                          : "this `hangar dev` cluster takes calls with its "
                            "per-run token only") +
          "; the CLI of the account that started it finds the token by itself (HANGAR_URL is "
          "enough); others send `Authorization: Bearer $(cat " +
          file + ")`, and the dashboard asks for it"));
}

std::optional<RequestGuard::Refusal> RequestGuard::Check(const httplib::Request& req) const {
  const bool mutating = Mutating(req.method);
  if (auto r = CheckHost(req)) return r;
  if (auto r = CheckOrigin(req, mutating)) return r;
  if (auto r = CheckDevToken(req)) return r;
  if (mutating) return CheckContentType(req);
  return std::nullopt;
}

}  // namespace hangar::controller
