#include "controller/service/haproxy_config.h"

#include <charconv>
#include <sstream>

#include "controller/service/service_book.h"

namespace hangar::controller::service {
namespace {

std::vector<std::string> Split(const std::string& line, char sep) {
  std::vector<std::string> out;
  std::string field;
  std::istringstream in(line);
  while (std::getline(in, field, sep)) out.push_back(field);
  return out;
}

bool ToInt(const std::string& s, long* out) {
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), *out);
  return ec == std::errc() && end == s.data() + s.size();
}

// "svc12" to 12.
bool SlotOf(const std::string& proxy, int* slot) {
  long v = 0;
  if (proxy.rfind("svc", 0) != 0 || !ToInt(proxy.substr(3), &v)) return false;
  *slot = static_cast<int>(v);
  return true;
}

}  // namespace

StatusOr<LbLayout> ParseLbLayout(const std::string& text) {
  const Status bad = Status::InvalidArgument("--service-lb '" + text +
                                             "' must be ADMIN@HOST:FIRST_PORT+SLOTS, such as "
                                             "unix:/run/hangar/lb.sock@0.0.0.0:30000+16 (HAProxy's "
                                             "runtime API, and where the endpoints listen)");
  const size_t at = text.rfind('@'), colon = text.rfind(':'), plus = text.rfind('+');
  if (at == std::string::npos || colon == std::string::npos || plus == std::string::npos ||
      colon < at || plus < colon) {
    return bad;
  }
  LbLayout l;
  l.admin = text.substr(0, at);
  l.host = text.substr(at + 1, colon - at - 1);
  long port = 0, slots = 0;
  if (l.admin.empty() || l.host.empty() ||
      !ToInt(text.substr(colon + 1, plus - colon - 1), &port) ||
      !ToInt(text.substr(plus + 1), &slots) || port < 1 || slots < 1 || slots > 256 ||
      port + slots > 65536) {
    return bad;
  }
  l.first_port = static_cast<int>(port);
  l.slots = static_cast<int>(slots);
  return l;
}

std::string FormatLbLayout(const LbLayout& l) {
  return l.admin + "@" + l.host + ":" + std::to_string(l.first_port) + "+" +
         std::to_string(l.slots);
}

std::string HaproxyConfig(const LbLayout& l, const EndpointTls& tls) {
  std::ostringstream c;
  const std::string socket = l.admin.rfind("unix:", 0) == 0 ? l.admin.substr(5) : "ipv4@" + l.admin;
  c << "# The load balancer of Hangar's services (docs/services.md), as `hangar service lb-config` "
       "writes it.\n"
       "# Hangar drives it over the runtime API: do not edit the svc* sections by hand.\n"
       "global\n"
       "    stats socket "
    << socket
    << " mode 600 level admin\n"
       "    stats timeout 30s\n";
  std::string bind_tls;
  if (!tls.cert.empty()) {
    // controller.crt's key is controller.key (not controller.crt.key, HAProxy's default name).
    c << "    ssl-load-extra-del-ext\n"
         "    ssl-default-bind-options ssl-min-ver TLSv1.2\n";
    bind_tls = " ssl crt \"" + tls.cert + "\" alpn h2,http/1.1";
    if (!tls.client_ca.empty()) bind_tls += " verify required ca-file \"" + tls.client_ca + "\"";
  }
  c << "defaults\n"
       "    mode http\n"
       "    timeout connect 2s\n"
       "    timeout client 60s\n"
       "    timeout server 60s\n"
       "    timeout queue 10s\n"
       "    timeout http-keep-alive 10s\n"
       "    # A request whose replica refused or dropped it (it died, or is stopping) goes to "
       "another.\n"
       "    retries 3\n"
       "    option redispatch 1\n"
       "    retry-on conn-failure empty-response\n";
  for (int k = 0; k < l.slots; ++k) {
    c << "frontend svc" << k << "\n"
      << "    bind " << l.host << ":" << (l.first_port + k) << bind_tls << "\n"
      << "    default_backend svc" << k << "\n"
      << "backend svc" << k << "\n"
      << "    balance leastconn\n"
      << "    server-template r 1-" << kServersPerSlot
      << " 127.0.0.1:9 disabled check inter 500ms fall 2 rise 1\n";
  }
  return c.str();
}

std::vector<std::string> HaproxyCommands(const LbChange& c) {
  const std::string server = "svc" + std::to_string(c.slot) + "/r" + std::to_string(c.server);
  switch (c.op) {
    case LbChange::Op::kEnable:
      return {"set server " + server + " addr " + c.address + " port " + std::to_string(c.port),
              "set server " + server + " state ready"};
    case LbChange::Op::kDrain:
      return {"set server " + server + " state drain"};
    case LbChange::Op::kDisable:
      return {"set server " + server + " state maint"};
  }
  return {};
}

std::map<std::pair<int, int>, int> ParseSessions(const std::string& show_stat) {
  std::map<std::pair<int, int>, int> out;
  std::istringstream in(show_stat);
  for (std::string line; std::getline(in, line);) {
    if (line.empty() || line[0] == '#') continue;
    const auto f = Split(line, ',');
    int slot = 0;
    long server = 0, scur = 0;
    if (f.size() < 5 || !SlotOf(f[0], &slot) || f[1].size() < 2 || f[1][0] != 'r') continue;
    if (!ToInt(f[1].substr(1), &server) || !ToInt(f[4], &scur)) continue;
    out[{slot, static_cast<int>(server)}] = static_cast<int>(scur);
  }
  return out;
}

std::map<std::pair<int, int>, std::string> ParseStatus(const std::string& show_stat) {
  std::map<std::pair<int, int>, std::string> out;
  std::istringstream in(show_stat);
  constexpr size_t kStatus = 17;  // show stat's 18th column
  for (std::string line; std::getline(in, line);) {
    if (line.empty() || line[0] == '#') continue;
    const auto f = Split(line, ',');
    int slot = 0;
    long server = 0;
    if (f.size() <= kStatus || !SlotOf(f[0], &slot) || f[1].size() < 2 || f[1][0] != 'r') continue;
    if (!ToInt(f[1].substr(1), &server)) continue;
    out[{slot, static_cast<int>(server)}] = f[kStatus];
  }
  return out;
}

bool LbAgrees(const std::vector<LbChange>& want,
              const std::map<std::pair<int, int>, std::string>& status) {
  for (const auto& c : want) {
    auto it = status.find({c.slot, c.server});
    if (it == status.end()) return false;
    const bool maint = it->second.rfind("MAINT", 0) == 0;
    const bool drain = it->second.rfind("DRAIN", 0) == 0;
    if (c.op == LbChange::Op::kDisable && !maint) return false;
    if (c.op == LbChange::Op::kEnable && (maint || drain)) return false;
    if (c.op == LbChange::Op::kDrain && maint) return false;
  }
  return true;
}

std::map<int, SlotTraffic> ParseTraffic(const std::string& show_stat) {
  std::map<int, SlotTraffic> out;
  std::istringstream in(show_stat);
  std::vector<std::string> header;
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("# ", 0) == 0) header = Split(line.substr(2), ',');
    if (line.empty() || line[0] == '#') continue;
    const auto f = Split(line, ',');
    int slot = 0;
    if (f.size() < 2 || (f[1] != "FRONTEND" && f[1] != "BACKEND") || !SlotOf(f[0], &slot)) continue;
    SlotTraffic& t = out[slot];
    for (size_t i = 0; i < header.size() && i < f.size(); ++i) {
      long v = 0;
      if (!ToInt(f[i], &v)) continue;
      if (f[1] == "FRONTEND" && header[i] == "req_tot") t.requests = v;
      if (f[1] == "FRONTEND" && header[i] == "hrsp_5xx") t.errors_5xx = v;
      if (f[1] == "FRONTEND" && header[i] == "req_rate") t.rps = v;
      // In flight: the backend's sessions at replicas and queued for one (a client's idle
      // keep-alive connection counts at the frontend only).
      if (f[1] == "BACKEND" && (header[i] == "scur" || header[i] == "qcur")) t.in_flight += v;
    }
  }
  return out;
}

}  // namespace hangar::controller::service
