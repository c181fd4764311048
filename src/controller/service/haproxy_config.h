// The load balancer in front of services: HAProxy (docs/services.md), configured once with a
// fixed set of endpoint slots -- slot k is frontend and backend `svc<k>` on first_port + k, with
// kServersPerSlot disabled servers `r1..rN` -- and driven from then on over its runtime API only
// (servers get an address, join, drain and leave rotation without a reload). This file holds the
// pure parts: the configuration text, the runtime commands for a change, and reading `show stat`.
#pragma once

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "common/status.h"
#include "controller/service/replica.h"

namespace hangar::controller::service {

struct LbLayout {
  std::string admin;               // the runtime API: unix:/path/admin.sock, or host:port
  std::string host = "127.0.0.1";  // where the endpoints listen
  int first_port = 0;              // slot k listens on first_port + k
  int slots = 8;
  std::string Endpoint(int slot) const { return host + ":" + std::to_string(first_port + slot); }
};

// "unix:/run/hangar/lb.sock@0.0.0.0:30000+16" (admin @ endpoints host:first_port + slots).
StatusOr<LbLayout> ParseLbLayout(const std::string& text);
std::string FormatLbLayout(const LbLayout& l);

// TLS at the endpoints: HAProxy terminates it with `cert` (a PEM certificate; its key in the same
// file or beside it as the same name with .key for the extension, as `hangar certs` writes them),
// and with `client_ca` set requires client certificates that CA signed. Traffic from HAProxy to
// the replicas stays plain HTTP on the cluster network.
struct EndpointTls {
  std::string cert;       // empty: plain HTTP endpoints
  std::string client_ca;  // empty: clients show no certificate
};

// haproxy.cfg for the layout: retries with redispatch (a request that reaches a replica that has
// just died is sent to another), TCP health checks as a second guard, and the runtime API.
std::string HaproxyConfig(const LbLayout& l, const EndpointTls& tls = {});

// The runtime API commands that carry out `c`, in order.
std::vector<std::string> HaproxyCommands(const LbChange& c);

// Sessions in flight per (slot, server) from `show stat`'s CSV; rows of other proxies are skipped.
std::map<std::pair<int, int>, int> ParseSessions(const std::string& show_stat);

// Each server's status (UP, DOWN, DRAIN, MAINT, ...) per (slot, server) from `show stat`.
std::map<std::pair<int, int>, std::string> ParseStatus(const std::string& show_stat);

// Whether the load balancer's servers are as `want` says: enabled ones neither in maintenance
// nor draining, draining ones out of maintenance, disabled ones in maintenance. False after HAProxy
// restarted (its servers all back in maintenance) or was changed by hand: the caller sets every
// server again.
bool LbAgrees(const std::vector<LbChange>& want,
              const std::map<std::pair<int, int>, std::string>& status);

// Per-slot request counters from `show stat` (the frontend's): total requests, 5xx answers and
// the request rate; and the backend's requests in flight.
struct SlotTraffic {
  long requests = 0;
  long errors_5xx = 0;
  long in_flight = 0;  // the backend's sessions at replicas plus those queued
  long rps = 0;        // the frontend's HTTP requests over the last second
};
std::map<int, SlotTraffic> ParseTraffic(const std::string& show_stat);

}  // namespace hangar::controller::service
