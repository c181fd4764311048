#include "controller/http_api.h"

#include <httplib.h>
#include <prometheus/counter.h>
#include <prometheus/gauge.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstdlib>
#include <regex>

#include "api/body.h"
#include "api/views.h"
#include "common/net.h"
#include "controller/http_api_internal.h"
#include "controller/image_resolver.h"
#include "controller/log_follow.h"
#include "controller/redact.h"
#include "controller/service/service_controller.h"
#include "job/queue_spec.h"

namespace hangar::controller {

namespace http {

StatusOr<const JobRecord*> ReadableJob(const ClusterState& st, const Principal& who, uint64_t id) {
  HANGAR_RETURN_IF_ERROR(st.MayAccessJob(who, id, Permission::kJobsRead));
  const JobRecord* j = st.FindJob(id);
  if (!j) {
    return Status::NotFound("job " + std::to_string(id) +
                            " does not exist; `hangar jobs` lists them");
  }
  return j;
}

void Reply(httplib::Response& res, const Status& s) {
  res.status = api::HttpStatusFor(s);
  res.set_content(api::SafeDump(api::ErrorJson(s)) + "\n", "application/json");
}

// SafeDump: a name with invalid UTF-8 that got into the state must not turn every listing into a
// 500.
void Reply(httplib::Response& res, int code, const nlohmann::json& body) {
  res.status = code;
  res.set_content(api::SafeDump(body) + "\n", "application/json");
}

StatusOr<uint64_t> IdOf(const httplib::Request& req) {
  try {
    return std::stoull(req.matches[1].str());
  } catch (...) {
    return Status::InvalidArgument("'" + req.matches[1].str() + "' is not a job id");
  }
}

// Reads `task` and the stream of a logs request.
StatusOr<uint32_t> TaskOf(const httplib::Request& req) {
  if (!req.has_param("task")) return 0u;
  try {
    return static_cast<uint32_t>(std::stoul(req.get_param_value("task")));
  } catch (...) {
    return Status::InvalidArgument("task must be a task index (0, 1, ...)");
  }
}

// A POST whose body is read through a bounded reader: cpp-httplib applies its body limit to
// Content-Length only, so a chunked body of any size would be read whole into memory first.
void BoundedPost(httplib::Server& s, const std::string& pattern, httplib::Server::Handler handler) {
  s.Post(pattern, [handler = std::move(handler)](const httplib::Request& req,
                                                 httplib::Response& res,
                                                 const httplib::ContentReader& read) {
    std::string body;
    // False also when cpp-httplib refused a Content-Length over its limit without reading it (a
    // connection that broke off mid-body hears nothing either way).
    const bool has_body = req.has_header("Content-Length") || req.has_header("Transfer-Encoding");
    // One allocation of the announced size (at most the cap), not a chain of doublings.
    if (req.has_header("Content-Length")) {
      body.reserve(std::min<size_t>(
          HttpApi::kMaxBody,
          std::strtoull(req.get_header_value("Content-Length").c_str(), nullptr, 10)));
    }
    const bool whole = !has_body || read([&](const char* data, size_t n) {
      if (body.size() + n > HttpApi::kMaxBody) return false;
      body.append(data, n);
      return true;
    });
    if (!whole) {
      res.set_header("Connection", "close");
      return Reply(res, Status::ResourceExhausted(
                            "the request body is over 1 MiB; a job spec is a few KB, send one "
                            "job at a time"));
    }
    httplib::Request bounded = req;
    bounded.body = std::move(body);
    handler(bounded, res);
  });
}

}  // namespace http

using namespace http;  // NOLINT: the handlers' own helpers

HttpApi::HttpApi(StateOwner* owner, AgentHub* hub, ControllerMetrics* metrics, TokenBook* tokens,
                 const TlsFiles& tls, const HttpLimits& limits)
    : owner_(owner), hub_(hub), metrics_(metrics), tokens_(tokens) {
  HttpServer made = MakeHttpServer(tls, limits);
  server_ = std::move(made.server);
  control_ = made.control;
  if (metrics_) conn_metrics_ = std::make_unique<ConnMetrics>(metrics_->registry());
  follows_ = std::make_unique<LogFollows>(hub_);
  Routes();
}

// The connection layer's series, registered once.
struct HttpApi::ConnMetrics {
  explicit ConnMetrics(prometheus::Registry& reg)
      : open(prometheus::BuildGauge()
                 .Name("hangar_http_connections_open")
                 .Help("REST API connections open (idle or in a request)")
                 .Register(reg)
                 .Add({})),
        in_flight(prometheus::BuildGauge()
                      .Name("hangar_http_requests_in_flight")
                      .Help("REST API requests being served by a worker thread (streams are not: "
                            "they hold none)")
                      .Register(reg)
                      .Add({})),
        accepted(prometheus::BuildCounter()
                     .Name("hangar_http_connections_accepted_total")
                     .Help("REST API connections accepted (before the caps)")
                     .Register(reg)
                     .Add({})),
        refused(prometheus::BuildCounter()
                    .Name("hangar_http_connections_refused_total")
                    .Help("REST API connections refused at once: over --http-max-connections "
                          "(max_connections), "
                          "over --http-max-connections-per-client (max_connections_per_client), or "
                          "no thread could "
                          "be started (no_thread)")
                    .Register(reg)),
        streams(prometheus::BuildGauge()
                    .Name("hangar_http_streams_open")
                    .Help("Live feeds and log follows open now (written by the stream pump, "
                          "without a worker)")
                    .Register(reg)
                    .Add({})),
        streams_ended(prometheus::BuildCounter()
                          .Name("hangar_http_streams_refused_total")
                          .Help("Live feeds and log follows refused (over --http-max-streams or "
                                "--http-max-streams-per-client: reason=cap) or dropped because the "
                                "client did not keep "
                                "up (reason=slow_reader)")
                          .Register(reg)),
        cut(prometheus::BuildCounter()
                .Name("hangar_http_connections_cut_total")
                .Help("REST API connections closed mid-request: the TLS handshake or headers not "
                      "in within "
                      "--http-header-timeout (header_timeout: slowloris), headers over 64 KiB "
                      "(header_size: answered "
                      "431), a request line over 8 KiB (uri_too_long: answered 414), the body not "
                      "in within "
                      "--http-body-timeout or stalled (body_timeout)")
                .Register(reg)),
        idle_closed(
            prometheus::BuildCounter()
                .Name("hangar_http_idle_connections_closed_total")
                .Help("REST API connections closed after --http-idle-timeout without a request")
                .Register(reg)
                .Add({})) {}
  prometheus::Gauge& open;
  prometheus::Gauge& in_flight;
  prometheus::Counter& accepted;
  prometheus::Family<prometheus::Counter>& refused;
  prometheus::Gauge& streams;
  prometheus::Family<prometheus::Counter>& streams_ended;
  prometheus::Family<prometheus::Counter>& cut;
  prometheus::Counter& idle_closed;
};

// Counters move only up: each by what the connection layer counted since the last scrape.
void HttpApi::ExportConnStats() {
  if (!conn_metrics_ || !control_) return;
  const HttpConnStats& st = control_->stats();
  MutexLock l(export_mu_);
  ConnMetrics& m = *conn_metrics_;
  m.open.Set(static_cast<double>(st.open.load()));
  m.in_flight.Set(static_cast<double>(st.in_flight.load()));
  m.streams.Set(static_cast<double>(st.streams.open.load()));
  auto raise = [](prometheus::Counter& c, int64_t total) {
    if (static_cast<double>(total) > c.Value()) c.Increment(static_cast<double>(total) - c.Value());
  };
  raise(m.accepted, st.accepted.load());
  raise(m.refused.Add({{"reason", "max_connections"}}), st.refused_total_cap.load());
  raise(m.refused.Add({{"reason", "max_connections_per_client"}}), st.refused_client_cap.load());
  raise(m.refused.Add({{"reason", "no_thread"}}), st.refused_no_thread.load());
  raise(m.cut.Add({{"reason", "header_timeout"}}), st.header_timeouts.load());
  raise(m.cut.Add({{"reason", "header_size"}}), st.headers_too_large.load());
  raise(m.cut.Add({{"reason", "uri_too_long"}}), st.uri_too_long.load());
  raise(m.streams_ended.Add({{"reason", "cap"}}), st.streams.refused.load());
  raise(m.streams_ended.Add({{"reason", "slow_reader"}}), st.streams.dropped_slow.load());
  raise(m.cut.Add({{"reason", "body_timeout"}}), st.body_timeouts.load());
  raise(m.idle_closed, st.idle_closed.load());
}

bool HttpApi::valid() const { return server_->is_valid(); }

httplib::Server::Handler HttpApi::Handle(std::optional<Permission> perm, RouteFn fn) {
  return [this, perm, fn = std::move(fn)](const httplib::Request& req, httplib::Response& res) {
    if (auto who = Authorize(req, res, perm)) fn(*who, req, res);
  };
}

std::optional<Principal> HttpApi::Authorize(const httplib::Request& req, httplib::Response& res,
                                            std::optional<Permission> perm) {
  Principal p;
  if (!tokens_) {
    p.open = true;
    p.role = Role::kAdmin;
    p.user = req.has_header("X-Hangar-User") ? req.get_header_value("X-Hangar-User") : "anonymous";
  } else {
    auto who = tokens_->Authenticate(
        req.has_header("Authorization") ? req.get_header_value("Authorization") : "",
        owner_->clock()->Now());
    if (!who.ok()) {
      Reply(res, who.status());
      return std::nullopt;
    }
    p = *who;
  }
  if (perm) {
    Status s = Allow(p, *perm);
    if (!s.ok()) {
      Reply(res, s);
      return std::nullopt;
    }
  }
  return p;
}

HttpApi::~HttpApi() { Stop(); }

StatusOr<int> HttpApi::Start(const std::string& host, int port) {
  const int bound = control_->Bind(host, port, /*backlog=*/4096);
  if (bound <= 0) {
    return Status::Unavailable(
        "cannot listen on " + host + ":" + std::to_string(port) +
        " for the API; is another process using it? Choose another with --api");
  }
  wiring_.guard.Bind(bound);
  thread_ = std::thread([this] { server_->listen_after_bind(); });
  pinner_ = std::make_unique<ImagePinner>(owner_, ImageResolverOptions{});
  // Until it runs, httplib's stop() would not end it: a Stop right after Start (a SIGTERM during
  // startup) would wait forever.
  for (int i = 0; i < 2000 && !server_->is_running(); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  return bound;
}

void HttpApi::Stop() {
  pinner_.reset();
  StopDashboard();
  if (follows_) follows_->Stop();
  if (server_) server_->stop();
  if (thread_.joinable()) thread_.join();
}

void HttpApi::Routes() {
  httplib::Server& s = *server_;
  s.set_socket_options(ExclusiveServerSocketOptions);
  s.set_tcp_nodelay(true);  // else Nagle and delayed ACKs add 40 ms to every POST
  s.set_payload_max_length(kMaxBody);
  // Before routing, so before any body is read: a refused request costs no more than its headers.
  s.set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
    auto refused = wiring_.guard.Check(req);
    if (!refused) return httplib::Server::HandlerResponse::Unhandled;
    res.set_header("Connection", "close");  // its body, if any, is never read
    Reply(res, refused->http_status, api::ErrorJson(refused->why));
    return httplib::Server::HandlerResponse::Handled;
  });
  s.set_error_handler([](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty()) return;
    Status st;
    if (res.status == 413) {
      st = Status::ResourceExhausted(
          "the request body is over 1 MiB; a job spec is a few KB, send one job at a time");
    } else if (res.status == 404) {
      st = Status::NotFound("no such endpoint: " + req.method + " " + req.path +
                            "; see docs/api.md");
    } else {
      st = Status(StatusCode::kInvalidArgument,
                  "the request could not be handled (HTTP " + std::to_string(res.status) + ")");
    }
    res.set_content(api::SafeDump(api::ErrorJson(st)) + "\n", "application/json");
  });
  // No 500 without its cause in the log.
  s.set_exception_handler(
      [](const httplib::Request& req, httplib::Response& res, std::exception_ptr ep) {
        std::string what = "unknown exception";
        try {
          if (ep) std::rethrow_exception(ep);
        } catch (const StoreCommitRefused& e) {  // the store took nothing (a full disk): say so
          return Reply(res, Status::Unavailable(e.what()));
        } catch (const std::exception& e) {
          what = e.what();
        } catch (...) {
        }
        spdlog::error("HTTP {} {} failed: {}", req.method, RedactCredentials(req.path), what);
        Reply(res, Status::Internal("the controller failed to handle this request (" + what +
                                    "); see its log"));
      });

  AuthRoutes();         // whoami, tokens and the audit log: http_api_auth.cc
  JobRoutes();          // job lists, bulk operations, accounting: http_api_jobs.cc
  DashboardRoutes();    // the web dashboard: web_ui.cc
  HistoryRoutes();      // the cluster's load over time: history_api.cc
  ServiceRoutes();      // services and their endpoints: service/service_api.cc
  ReservationRoutes();  // reservations and maintenance windows: http_api_reservations.cc
  StepRoutes();         // steps inside allocations (srun): http_api_steps.cc
  SessionRoutes();      // who is attached to a session, and its idleness: http_api_sessions.cc
  MaintenanceRoutes();  // rolling maintenance (`hangar maintain`): http_api_maintenance.cc
  GoodputRoutes();      // where jobs' wall time went: http_api_goodput.cc
  TopologyRoutes();     // the fabric the agents discovered: http_api_topology.cc
  // Who leads; a standby answers it too. "single": one controller, no lease.
  s.Get("/v1/leader", [this](const httplib::Request&, httplib::Response& res) {
    if (!wiring_.leader_info) return Reply(res, 200, {{"role", "single"}, {"leader", nullptr}});
    nlohmann::json me = wiring_.leader_info();
    Reply(res, 200, {{"role", "leader"}, {"name", me.value("name", "")}, {"leader", me}});
  });
  // Interactive sessions are gRPC streams on a port of their own (docs/interactive.md): where.
  s.Get("/v1/sessions/endpoint",
        Handle(std::nullopt,
               [this](const Principal&, const httplib::Request&, httplib::Response& res) {
                 if (wiring_.sessions.port <= 0) {
                   return Reply(
                       res, Status::Unavailable(
                                "this controller serves no interactive sessions (--sessions off)"));
                 }
                 Reply(res, 200, {{"port", wiring_.sessions.port}});
               }));
  s.Get("/healthz", [this](const httplib::Request&, httplib::Response& res) {
    Reply(res, 200, {{"status", "ok"}, {"agents", hub_->connected()}});
  });
  s.Get("/metrics",
        Handle(Permission::kMetricsRead, [this](const Principal&, const httplib::Request& req,
                                                httplib::Response& res) {
          const std::string form = req.has_param("labels") ? req.get_param_value("labels")
                                                           : (wiring_.dcgm_metrics ? "dcgm" : "");
          if (!form.empty() && form != "dcgm" && form != "clean") {
            return Reply(
                res, Status::InvalidArgument(
                         "labels must be dcgm (dcgm-exporter's names, types and labels) or clean "
                         "(promtool-clean)"));
          }
          const bool dcgm = form == "dcgm";
          ExportConnStats();
          metrics_->SetAgents(static_cast<double>(hub_->connected()),
                              static_cast<double>(hub_->heartbeats()));
          std::vector<std::pair<std::string, int64_t>> refused;
          for (size_t r = 0; r < static_cast<size_t>(AgentHub::Refusal::kCount); ++r) {
            const auto why = static_cast<AgentHub::Refusal>(r);
            refused.emplace_back(AgentHub::RefusalName(why), hub_->refused(why));
          }
          metrics_->SetAgentRefusals(refused);
          metrics_->SetCounts(owner_->Call<ClusterState::Counts>(
              [](ClusterState& st, Effects*) { return st.GetCounts(); }));
          // ?gpus=0: the controller's own series only. Per-GPU series cost ~15 lines per GPU (1.2M
          // at 10,240 nodes x 8): a fleet that large scrapes them from dcgm-exporter on each node.
          // ?nodes=0: without the one hangar_node_state series per node.
          std::string text = metrics_->Render();
          if (wiring_.services)
            text += wiring_.services->RenderMetrics();  // hangar_service_*: docs/services.md
          text += owner_->Call<std::string>([this](ClusterState& st, Effects*) {  // docs/goodput.md
            return st.goodput().RenderMetrics(owner_->clock()->Now());
          });
          if (!(req.has_param("nodes") && req.get_param_value("nodes") == "0")) {
            text += ControllerMetrics::RenderNodeStates(
                owner_->Call<std::vector<std::pair<std::string, std::string>>>(
                    [](ClusterState& st, Effects*) { return st.NodeStates(); }));
          }
          if (req.has_param("gpus") && req.get_param_value("gpus") == "0") {
            res.set_content(text, "text/plain; version=0.0.4");
            return;
          }
          auto gpus = owner_->Call<std::vector<ClusterState::GpuSeries>>(
              [](ClusterState& st, Effects*) { return st.GpuMetrics(); });
          res.set_content(text + ControllerMetrics::RenderGpuSeries(gpus, dcgm),
                          "text/plain; version=0.0.4");
        }));

  OneJobRoutes();  // submit, read, cancel, explain, logs: http_api_job.cc
  NodeRoutes();    // nodes, drain, remediation: http_api_nodes.cc
  QueueRoutes();   // queues, fair share, usage: http_api_queues.cc
  EventRoutes();   // the event log: http_api_events.cc
}

}  // namespace hangar::controller
