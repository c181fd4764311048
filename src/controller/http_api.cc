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
  HANGAR_RETURN_IF_ERROR(st.MayAccessJob(who, id, false));
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
  ConnMetrics& m = *conn_metrics_;
  std::lock_guard<std::mutex> l(export_mu_);
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
  guard_.Bind(bound);
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
    auto refused = guard_.Check(req);
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
    if (!leader_info_) return Reply(res, 200, {{"role", "single"}, {"leader", nullptr}});
    nlohmann::json me = leader_info_();
    Reply(res, 200, {{"role", "leader"}, {"name", me.value("name", "")}, {"leader", me}});
  });
  // Interactive sessions are gRPC streams on a port of their own (docs/interactive.md): where.
  s.Get("/v1/sessions/endpoint", [this](const httplib::Request& req, httplib::Response& res) {
    if (!Authorize(req, res, std::nullopt)) return;
    if (sessions_.port <= 0) {
      return Reply(res, Status::Unavailable(
                            "this controller serves no interactive sessions (--sessions off)"));
    }
    Reply(res, 200, {{"port", sessions_.port}});
  });
  s.Get("/healthz", [this](const httplib::Request&, httplib::Response& res) {
    Reply(res, 200, {{"status", "ok"}, {"agents", hub_->connected()}});
  });
  s.Get("/metrics", [this](const httplib::Request& req, httplib::Response& res) {
    if (!Authorize(req, res, Permission::kMetricsRead)) return;
    const std::string form =
        req.has_param("labels") ? req.get_param_value("labels") : (dcgm_metrics_ ? "dcgm" : "");
    if (!form.empty() && form != "dcgm" && form != "clean") {
      return Reply(res,
                   Status::InvalidArgument(
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
    if (services_) text += services_->RenderMetrics();  // hangar_service_*: docs/services.md
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
  });

  BoundedPost(s, "/v1/jobs", [this](const httplib::Request& req, httplib::Response& res) {
    auto who = Authorize(req, res, Permission::kJobsSubmit);
    if (!who) return;
    Status readable = api::CheckUtf8(req.body, "the job spec");
    if (readable.ok()) readable = api::CheckNesting(req.body, "the job spec");
    if (!readable.ok()) return Reply(res, readable);
    auto spec = job::ParseJobSpec(req.body, "request body");
    if (!spec.ok()) return Reply(res, spec.status());
    if (Status abs = job::RequireAbsoluteWorkdirs(*spec); !abs.ok()) return Reply(res, abs);
    // Container jobs: mounts the cluster allows, and every image pinned to its digest now (off the
    // state thread: it asks the registry).
    const bool mounts =
        std::any_of(spec->tasks.begin(), spec->tasks.end(),
                    [](const job::TaskGroupSpec& g) { return !g.container.mounts.empty(); });
    if (mounts) {
      auto allowed = owner_->Call<std::vector<std::string>>(
          [](ClusterState& st, Effects*) { return st.options().mounts_allowed; });
      if (Status m = CheckMounts(*spec, allowed); !m.ok()) return Reply(res, m);
    }
    if (HasFileSources(*spec)) {  // file:// artifacts: only under the cluster's data.file_roots
      auto roots = owner_->Call<std::vector<std::string>>(
          [](ClusterState& st, Effects*) { return st.options().data.file_roots; });
      if (Status f = CheckFileSources(*spec, roots); !f.ok()) return Reply(res, f);
    }
    // A registry that is down does not lose the submission: the job is accepted with its tags and
    // waits, unplaced, until the pinner has pinned them (ClusterState::OnPinned).
    Status pin = PinImages(&*spec, ImageResolverOptions{});
    if (!pin.ok() && pin.code() != StatusCode::kUnavailable) return Reply(res, pin);
    for (const auto& t : spec->tasks) {
      if (t.command.empty()) {
        return Reply(
            res, Status::InvalidArgument("task group '" + t.name +
                                         "' has no command; give it command: [program, args...]"));
      }
    }
    spec->user = who->user;            // who submits, never what the spec says
    spec->run_as = TaskAccount(*who);  // and the Unix account its tasks run as
    // A job array: `?count=N` submits N copies in one commit (a sweep, a benchmark's queue).
    // Bounded, so that one request cannot hold the state thread (and every other caller) for
    // seconds: larger arrays are several requests.
    long count = 1;
    if (req.has_param("count")) {
      auto n = api::ParseCount(req.get_param_value("count"), "count", 1, kMaxSubmitCount);
      if (!n.ok()) {
        return Reply(res, Status::InvalidArgument(n.status().message() +
                                                  "; submit larger arrays in several requests"));
      }
      count = static_cast<long>(*n);
      if (count > 1 && !spec->array.empty()) {
        return Reply(res, Status::InvalidArgument(
                              "a job with array: is submitted once (it becomes one job per "
                              "element); drop ?count="));
      }
    }
    // Idempotency-Key: a retry of a submission whose answer was lost gets that answer again
    // (marked by the Idempotent-Replayed header), not a second job; the key is remembered in the
    // same commit as the jobs.
    const std::string key =
        req.has_header("Idempotency-Key") ? req.get_header_value("Idempotency-Key") : "";
    if (key.size() > 200 || !api::CheckUtf8(key, "the key").ok()) {
      return Reply(res,
                   Status::InvalidArgument(
                       "Idempotency-Key must be at most 200 characters of UTF-8, such as a UUID"));
    }
    const SubmissionDigest digest = SubmissionDigest::Of(req.body, count);
    struct Submitted {
      nlohmann::json answer;
      bool replayed = false;
      std::optional<Status> over_cap;  // --max-queued-per-user: answered 429
    };
    auto done = owner_->Call<StatusOr<Submitted>>(
        [spec = std::move(*spec), count, this, p = *who, &key, &digest](
            ClusterState& st, Effects* fx) -> StatusOr<Submitted> {
          const Time now = owner_->clock()->Now();
          if (!key.empty()) {
            HANGAR_ASSIGN_OR_RETURN(auto before, st.RecallSubmission(p.user, key, digest, now));
            if (before) return Submitted{*before, true};
          }
          HANGAR_RETURN_IF_ERROR(st.MaySubmit(p, spec.queue));
          const long elements =
              spec.array.empty() ? count : static_cast<long>(spec.array.indices.size());
          if (Status cap = st.MayQueue(p.user, elements); !cap.ok())
            return Submitted{{}, false, cap};
          if (!spec.array.empty()) {
            HANGAR_ASSIGN_OR_RETURN(std::vector<sched::JobId> ids, st.SubmitArray(spec, now, fx));
            nlohmann::json answer = {{"id", ids.front()},     {"array_id", ids.front()},
                                     {"count", ids.size()},   {"first_id", ids.front()},
                                     {"last_id", ids.back()}, {"state", "pending"}};
            if (!key.empty()) st.RememberSubmission(p.user, key, digest, answer, now, fx);
            return Submitted{answer, false};
          }
          sched::JobId first = 0, last = 0;
          for (long i = 0; i < count; ++i) {
            HANGAR_ASSIGN_OR_RETURN(last, st.Submit(spec, now, fx));
            if (i == 0) first = last;
          }
          nlohmann::json answer = count == 1 ? nlohmann::json{{"id", first}, {"state", "pending"}}
                                             : nlohmann::json{{"first_id", first},
                                                              {"last_id", last},
                                                              {"count", count},
                                                              {"state", "pending"}};
          if (!key.empty()) st.RememberSubmission(p.user, key, digest, answer, now, fx);
          return Submitted{answer, false};
        });
    if (!done.ok()) return Reply(res, done.status());
    if (done->over_cap) return Reply(res, 429, api::ErrorJson(*done->over_cap));
    if (done->replayed) {
      res.set_header("Idempotent-Replayed", "true");
      return Reply(res, 201, done->answer);
    }
    const long submitted = done->answer.contains("count") ? done->answer["count"].get<long>() : 1;
    for (long i = 0; i < submitted; ++i) metrics_->CountSubmit();
    if (!pin.ok()) {
      done->answer["warning"] =
          pin.message() + "; the job is queued and waits until its image can be pinned to a digest";
      if (pinner_) pinner_->Wake();
    }
    Reply(res, 201, done->answer);
  });
  s.Get(R"(/v1/jobs/(\d+))", [this](const httplib::Request& req, httplib::Response& res) {
    auto who = Authorize(req, res, Permission::kJobsRead);
    if (!who) return;
    auto id = IdOf(req);
    if (!id.ok()) return Reply(res, id.status());
    auto job = owner_->Call<StatusOr<api::JobView>>(
        [&](ClusterState& st, Effects*) -> StatusOr<api::JobView> {
          HANGAR_RETURN_IF_ERROR(st.MayAccessJob(*who, *id, false));
          return st.GetJob(*id);
        });
    if (!job.ok()) return Reply(res, job.status());
    // A job's environment may hold its owner's secrets (API keys): its values are for the owner
    // and admins; a viewer or queue-admin sees the names only.
    if (!who->open && who->role != Role::kAdmin && who->user != job->user &&
        job->spec.is_object()) {
      for (auto& group : job->spec["tasks"]) {
        if (!group.contains("env")) continue;
        for (auto& [name, value] : group["env"].items())
          value = "(hidden: only " + job->user + " and admins see it)";
      }
    }
    Reply(res, 200, api::ToJson(*job));
  });
  auto cancel = [this](const httplib::Request& req, httplib::Response& res) {
    auto who = Authorize(req, res, Permission::kJobsCancel);
    if (!who) return;
    auto id = IdOf(req);
    if (!id.ok()) return Reply(res, id.status());
    Status st = owner_->Call<Status>([&](ClusterState& s, Effects* fx) {
      HANGAR_RETURN_IF_ERROR(s.MayAccessJob(*who, *id, true));
      return s.Cancel(*id, owner_->clock()->Now(), fx);
    });
    if (!st.ok()) return Reply(res, st);
    Reply(res, 200, {{"id", *id}, {"state", "cancelled"}});
  };
  BoundedPost(s, R"(/v1/jobs/(\d+)/cancel)", cancel);
  s.Delete(R"(/v1/jobs/(\d+))", cancel);
  s.Get(R"(/v1/jobs/(\d+)/explain)", [this](const httplib::Request& req, httplib::Response& res) {
    auto who = Authorize(req, res, Permission::kJobsRead);
    if (!who) return;
    auto id = IdOf(req);
    if (!id.ok()) return Reply(res, id.status());
    Time estimated_start = kNever;  // the head job's reservation, when the scheduler made one
    nlohmann::json replaced;        // its nodes replaced in place from spares (spare_pool.h)
    auto job = owner_->Call<StatusOr<api::JobView>>(
        [&](ClusterState& st, Effects*) -> StatusOr<api::JobView> {
          HANGAR_RETURN_IF_ERROR(st.MayAccessJob(*who, *id, false));
          const auto& reserved = st.waiting_order().reserved_start;
          if (auto r = reserved.find(*id); r != reserved.end()) estimated_start = r->second;
          replaced = st.spares().Json(*id);
          return st.GetJob(*id);
        });
    if (!job.ok()) return Reply(res, job.status());
    nlohmann::json out = {{"id", job->id},
                          {"name", job->name},
                          {"state", job->state},
                          {"reason", job->reason},
                          {"rule", job->reason_rule},
                          {"attempt", job->attempt},
                          {"message", job->message},
                          {"estimated_start_ms", nullptr}};
    if (job->state == "pending" && estimated_start != kNever)
      out["estimated_start_ms"] = estimated_start;
    if (!job->progress.is_null()) out["progress"] = job->progress;
    if (!replaced.is_null()) out["replaced"] = std::move(replaced);
    if (services_) {  // a service's replica: `hangar explain` says why the service has its count
      if (auto svc = services_->OwnerOf(job->id)) out["service"] = *svc;
    }
    Reply(res, 200, out);
  });
  s.Get(R"(/v1/jobs/(\d+)/logs)", [this](const httplib::Request& req, httplib::Response& res) {
    auto who = Authorize(req, res, Permission::kJobsRead);
    if (!who) return;
    auto id = IdOf(req);
    auto task = TaskOf(req);
    if (!id.ok()) return Reply(res, id.status());
    if (!task.ok()) return Reply(res, task.status());
    std::optional<uint32_t> attempt;
    if (req.has_param("attempt")) {
      auto n = api::ParseCount(req.get_param_value("attempt"), "attempt", 0, 1'000'000);
      if (!n.ok()) return Reply(res, n.status());
      attempt = static_cast<uint32_t>(*n);
    }
    auto where = owner_->Call<StatusOr<std::pair<std::string, std::string>>>(
        [&](ClusterState& st, Effects*) -> StatusOr<std::pair<std::string, std::string>> {
          HANGAR_RETURN_IF_ERROR(st.MayAccessJob(*who, *id, false));
          return st.LocateTask(*id, *task, attempt);
        });
    if (!where.ok()) return Reply(res, where.status());
    const bool follow = req.has_param("follow") && req.get_param_value("follow") != "0";
    const bool err = req.has_param("stream") && req.get_param_value("stream") == "stderr";
    // Not a structured binding: clang 14 cannot capture those in the lambda below.
    const std::string node = where->first, task_id = where->second;
    if (follow) {  // until the task ends: the stream pump writes it, not this worker
      auto sink =
          control_->TakeStream(StreamHead{"text/plain", false, {{"Cache-Control", "no-store"}}});
      if (!sink.ok()) return Reply(res, sink.status());
      return follows_->Open(*std::move(sink), node, task_id, err);
    }
    res.set_chunked_content_provider("text/plain", [this, node, task_id, err, offset = uint64_t{0}](
                                                       size_t, httplib::DataSink& sink) mutable {
      while (true) {
        auto chunk = hub_->ReadLog(node, task_id, offset, err, 5 * kSecond);
        if (!chunk.ok()) {
          const std::string msg = "\n[hangar: " + chunk.status().message() + "]\n";
          sink.write(msg.data(), msg.size());
          sink.done();
          return true;
        }
        if (!chunk->error().empty()) {
          const std::string msg = "[hangar: " + chunk->error() + "]\n";
          sink.write(msg.data(), msg.size());
          sink.done();
          return true;
        }
        if (!chunk->data().empty()) {
          if (!sink.write(chunk->data().data(), chunk->data().size())) return false;
          offset += chunk->data().size();
          continue;
        }
        sink.done();  // all there is now
        return true;
      }
    });
  });
  s.Get("/v1/nodes", [this](const httplib::Request& req, httplib::Response& res) {
    if (!Authorize(req, res, Permission::kClusterRead)) return;
    auto nodes = owner_->Call<std::vector<api::NodeView>>(
        [](ClusterState& st, Effects*) { return st.ListNodes(); });
    nlohmann::json out = nlohmann::json::array();
    for (const auto& n : nodes) out.push_back(api::ToJson(n));
    Reply(res, 200, {{"nodes", out}});
  });
  s.Get(R"(/v1/nodes/([^/]+))", [this](const httplib::Request& req, httplib::Response& res) {
    auto who = Authorize(req, res, Permission::kClusterRead);
    if (!who) return;
    std::string name = req.matches[1].str();
    auto node = owner_->Call<StatusOr<api::NodeView>>(
        [&](ClusterState& st, Effects*) { return st.GetNode(name); });
    if (!node.ok()) return Reply(res, node.status());
    nlohmann::json j = api::ToJson(*node);
    auto events = owner_->Events("node/" + name, 50);
    if (events.ok() && Allow(*who, Permission::kEventsRead).ok()) {
      nlohmann::json ev = nlohmann::json::array();
      for (const auto& e : *events)
        ev.push_back({{"time_ms", e.time}, {"kind", e.kind}, {"message", e.message}});
      j["events"] = ev;
    }
    Reply(res, 200, j);
  });
  auto drain = [this](bool on) {
    return [this, on](const httplib::Request& req, httplib::Response& res) {
      if (!Authorize(req, res, Permission::kNodesDrain)) return;
      std::string name = req.matches[1].str(), reason;
      if (on) {
        auto body = api::ParseObject(req.body, "{\"reason\": \"bad fan\"}");
        if (!body.ok()) return Reply(res, body.status());
        auto r = api::OptString(*body, "reason");
        if (!r.ok()) return Reply(res, r.status());
        reason = r->value_or("");
        Status text = api::CheckUtf8(reason, "the reason");
        if (!text.ok()) return Reply(res, text);
      }
      Status st = owner_->Call<Status>([&](ClusterState& s, Effects* fx) {
        return on ? s.Drain(name, reason, owner_->clock()->Now(), fx)
                  : s.Undrain(name, owner_->clock()->Now(), fx);
      });
      if (!st.ok()) return Reply(res, st);
      Reply(res, 200, {{"node", name}, {"drained", on}});
    };
  };
  BoundedPost(s, R"(/v1/nodes/([^/]+)/drain)", drain(true));
  BoundedPost(s, R"(/v1/nodes/([^/]+)/undrain)", drain(false));
  // Tasks a node runs that the store does not know (held since its agent registered).
  BoundedPost(
      s, R"(/v1/nodes/([^/]+)/orphans)",
      [this](const httplib::Request& req, httplib::Response& res) {
        if (!Authorize(req, res, Permission::kNodesDrain)) return;
        const std::string name = req.matches[1].str();
        constexpr const char* kExample = "{\"decision\": \"stop\"} (decision: stop or release)";
        auto body = api::ParseObject(req.body, kExample);
        if (!body.ok()) return Reply(res, body.status());
        auto decision = api::OptString(*body, "decision");
        if (!decision.ok()) return Reply(res, decision.status());
        if (*decision != "stop" && *decision != "release") {
          return Reply(res,
                       Status::InvalidArgument(
                           std::string("the body needs \"decision\": send JSON like ") + kExample));
        }
        const bool stop = *decision == "stop";
        Status st = owner_->Call<Status>([&](ClusterState& s, Effects* fx) {
          return s.DecideHeldOrphans(name, stop, owner_->clock()->Now(), fx);
        });
        if (!st.ok()) return Reply(res, st);
        Reply(res, 200, {{"node", name}, {"decision", **decision}});
      });
  BoundedPost(
      s, R"(/v1/nodes/([^/]+)/remediate)",
      [this](const httplib::Request& req, httplib::Response& res) {
        if (!Authorize(req, res, Permission::kNodesDrain)) return;
        const std::string name = req.matches[1].str();
        constexpr const char* kExample =
            "{\"remedy\": \"gpu-reset\", \"gpu\": 3, \"note\": \"nvidia-smi -r\"} (remedy: "
            "gpu-reset, reboot or repair)";
        auto body = api::ParseObject(req.body, kExample);
        if (!body.ok()) return Reply(res, body.status());
        auto remedy_field = api::OptString(*body, "remedy");
        auto gpu_field = api::OptInt(*body, "gpu", -1, 1023);
        auto note_field = api::OptString(*body, "note");
        for (const Status& bad : {remedy_field.status(), gpu_field.status(), note_field.status()}) {
          if (!bad.ok()) return Reply(res, bad);
        }
        if (!remedy_field->has_value()) {
          return Reply(res,
                       Status::InvalidArgument(
                           std::string("the body needs \"remedy\": send JSON like ") + kExample));
        }
        const std::string remedy = **remedy_field;
        const int gpu = static_cast<int>(gpu_field->value_or(-1));
        const std::string note = note_field->value_or("");
        Status text = api::CheckUtf8(note, "the note");
        if (!text.ok()) return Reply(res, text);
        Status st = owner_->Call<Status>([&](ClusterState& s, Effects* fx) {
          return s.Remediate(name, remedy, gpu, note, owner_->clock()->Now(), fx);
        });
        if (!st.ok()) return Reply(res, st);
        Reply(res, 200, {{"node", name}, {"remedy", remedy}, {"gpu", gpu}});
      });
  BoundedPost(s, "/v1/health/safety-valve/reset",
              [this](const httplib::Request& req, httplib::Response& res) {
                if (!Authorize(req, res, Permission::kNodesDrain)) return;
                owner_->Call<bool>([&](ClusterState& s, Effects* fx) {
                  s.ResetSafetyValve(owner_->clock()->Now(), fx);
                  return true;
                });
                Reply(res, 200, {{"safety_valve", "reset"}});
              });
  BoundedPost(s, "/v1/queues", [this](const httplib::Request& req, httplib::Response& res) {
    if (!Authorize(req, res, Permission::kQueuesApply)) return;
    Status readable = api::CheckUtf8(req.body, "the queues file");
    if (readable.ok()) readable = api::CheckNesting(req.body, "the queues file");
    if (!readable.ok()) return Reply(res, readable);
    auto specs = job::ParseQueues(req.body, "queues file");
    if (!specs.ok()) return Reply(res, specs.status());
    auto summary = owner_->Call<StatusOr<nlohmann::json>>(
        [&](ClusterState& st, Effects* fx) -> StatusOr<nlohmann::json> {
          nlohmann::json out;
          HANGAR_RETURN_IF_ERROR(st.ApplyQueues(*specs, owner_->clock()->Now(), fx, &out));
          return out;
        });
    if (!summary.ok()) return Reply(res, summary.status());
    Reply(res, 200, *summary);
  });
  s.Get("/v1/queues", [this](const httplib::Request& req, httplib::Response& res) {
    if (!Authorize(req, res, Permission::kClusterRead)) return;
    Reply(res, 200,
          owner_->Call<nlohmann::json>([](ClusterState& st, Effects*) { return st.QueuesJson(); }));
  });
  s.Get("/v1/share", [this](const httplib::Request& req, httplib::Response& res) {
    if (!Authorize(req, res, Permission::kClusterRead)) return;
    Reply(res, 200, owner_->Call<nlohmann::json>([this](ClusterState& st, Effects*) {
      return st.ShareJson(owner_->clock()->Now());
    }));
  });
  s.Get("/v1/usage", [this](const httplib::Request& req, httplib::Response& res) {
    auto who = Authorize(req, res, Permission::kUsageRead);
    if (!who) return;
    const std::string by = req.has_param("by") ? req.get_param_value("by") : "queue";
    Duration window = 7 * kDay;
    if (req.has_param("since")) {
      auto d = ParseDuration(req.get_param_value("since"));
      if (!d.ok() || *d <= 0) {
        return Reply(res, Status::InvalidArgument(
                              "since must be a duration back from now, like 7d, 12h or 30m"));
      }
      window = *d;
    }
    auto out = owner_->Call<StatusOr<nlohmann::json>>([&](ClusterState& st, Effects*) {
      const Time now = owner_->clock()->Now();
      return st.UsageJsonFor(*who, by, now - window, now);
    });
    if (!out.ok()) return Reply(res, out.status());
    Reply(res, 200, *out);
  });
  s.Get("/v1/events", [this](const httplib::Request& req, httplib::Response& res) {
    auto who = Authorize(req, res, std::nullopt);
    if (!who) return;
    std::string subject = req.has_param("subject") ? req.get_param_value("subject") : "";
    int limit = 100;
    if (req.has_param("limit")) {
      auto n = api::ParseCount(req.get_param_value("limit"), "limit", 1, 10000);
      if (!n.ok()) return Reply(res, n.status());
      limit = static_cast<int>(*n);
    }
    // subject=job/ID is one job's events. The store matches subjects by prefix, so job/4 would
    // also bring job/42's: ask for the most and keep job/4's (and its job/4/... sub-subjects).
    static const std::regex job_re(R"(^job/(\d{1,18})$)");
    std::smatch m;
    const bool one_job = std::regex_match(subject, m, job_re);
    // Without events:read, a user may still read the events of a job they may see (their own).
    if (Status all = Allow(*who, Permission::kEventsRead); !all.ok()) {
      if (!one_job || !Allow(*who, Permission::kJobsRead).ok()) {
        if (!Allow(*who, Permission::kJobsRead).ok()) return Reply(res, all);
        return Reply(res, Status::PermissionDenied(
                              "permission events:read is missing: " + who->Describe() +
                              " may read the events of their own jobs only: `hangar events job/ID` "
                              "(GET /v1/events?subject=job/ID); ask an admin for a viewer token to "
                              "read every event"));
      }
      const sched::JobId id = std::stoull(m[1].str());
      Status mine = owner_->Call<Status>(
          [&](ClusterState& st, Effects*) { return st.MayAccessJob(*who, id, false); });
      if (!mine.ok()) return Reply(res, mine);
    }
    auto events = owner_->Events(subject, one_job ? 10000 : limit);
    if (!events.ok()) return Reply(res, events.status());
    nlohmann::json out = nlohmann::json::array();
    for (const auto& e : *events) {
      if (static_cast<int>(out.size()) >= limit) break;
      if (one_job && e.subject != subject &&
          e.subject.compare(0, subject.size() + 1, subject + "/") != 0)
        continue;
      out.push_back({{"id", e.id},
                     {"time_ms", e.time},
                     {"kind", e.kind},
                     {"subject", e.subject},
                     {"message", e.message}});
    }
    Reply(res, 200, {{"events", out}});
  });
}

}  // namespace hangar::controller
