// The REST API (docs/api.md): JSON over HTTP with cpp-httplib. Handlers hand commands to the state
// owner and answer once what they changed is durable. Errors are JSON with a message that says
// what to fix; bodies over 1 MiB are refused before they are read. Connections are held to the
// limits of http_server.h (timeouts, caps per client and in all): idle and slow clients cost no
// worker, and long-lived responses (`logs -f`, the dashboard's feed) hold none either: the
// stream pump writes them.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include "common/mutex.h"
#include "common/tls_files.h"
#include "controller/agent_hub.h"
#include "controller/history.h"
#include "controller/http_server.h"
#include "controller/image_resolver.h"
#include "controller/metrics.h"
#include "controller/request_guard.h"
#include "controller/state/auth.h"
#include "controller/state_owner.h"

namespace httplib {
class Server;
struct Request;
struct Response;
}  // namespace httplib

namespace hangar::controller {

class LiveFeed;
class LogFollows;
class StepRelay;
namespace service {
class ServiceController;
}

class HttpApi {
 public:
  static constexpr size_t kMaxBody = 1 << 20;
  // Most copies one `POST /v1/jobs?count=N` may submit (each request is one commit on the state
  // thread; 10,000 take ~0.3 s).
  static constexpr long kMaxSubmitCount = 10'000;
  // How long a person's token lives unless its request says ("ttl": "30d" or "never").
  static constexpr Duration kDefaultTokenTtl = 90 * kDay;

  // `tokens` null: the API is open (`--auth none`) and every caller is an admin named by the
  // X-Hangar-User header (or "anonymous").
  // `tls` non-empty: HTTPS with its certificate and key (the CLI checks them against the CA).
  HttpApi(StateOwner* owner, AgentHub* hub, ControllerMetrics* metrics, TokenBook* tokens = nullptr,
          const TlsFiles& tls = {}, const HttpLimits& limits = {});
  // False when the TLS certificate or key could not be loaded.
  bool valid() const;
  ~HttpApi();
  // Binds host:port (port 0 picks a free one) and serves on a background thread. Returns the port.
  StatusOr<int> Start(const std::string& host, int port);
  void Stop();
  // `--metrics-labels dcgm`: /metrics speaks dcgm-exporter's form unless ?labels=clean.
  void set_dcgm_metrics(bool on) { wiring_.dcgm_metrics = on; }
  // What every request passes before routing (request_guard.h): Host, Origin, Content-Type and,
  // with `--auth dev`, the dev token. Call before Start.
  void set_request_guard(RequestGuardOptions options) {
    wiring_.guard = RequestGuard(std::move(options));
  }
  // With leader election: who this leader is, for GET /v1/leader (LeaderInfo::ToJson).
  void set_leader_info(std::function<nlohmann::json()> info) {
    wiring_.leader_info = std::move(info);
  }
  // What the history keeps, for GET /v1/history (history.h). Call before Start.
  void set_history_options(const HistoryOptions& o) { wiring_.history = o; }
  // Services (docs/services.md): null when the controller has no load balancer. Call before Start.
  void set_services(service::ServiceController* s) { wiring_.services = s; }
  // Where interactive sessions are served (session_service.h), for GET /v1/sessions/endpoint, and
  // who has them open, for GET /v1/jobs/ID/sessions. Call before Start; port 0: not served.
  void set_sessions(int port, const SessionService* sessions) {
    wiring_.sessions = {port, sessions};
  }
  // Steps inside allocations (step_relay.h), for GET /v1/jobs/ID/steps. Call before Start.
  void set_steps(const StepRelay* steps) { wiring_.steps = steps; }

 private:
  void Routes();
  void AuthRoutes();    // http_api_auth.cc
  void JobRoutes();     // lists, bulk operations and accounting: http_api_jobs.cc
  void OneJobRoutes();  // http_api_job.cc: submit, read, cancel, explain, logs
  // GET /v1/jobs/ID from the published read model: false when the state must answer (a queue
  // admin's access, another's job whose environment is hidden).
  bool ReplyFromReadModel(const Principal& who, uint64_t id, httplib::Response& res);
  void NodeRoutes();         // http_api_nodes.cc: /v1/nodes, /v1/health/safety-valve/reset
  void QueueRoutes();        // http_api_queues.cc: /v1/queues, /v1/share, /v1/usage
  void EventRoutes();        // http_api_events.cc: /v1/events
  void DashboardRoutes();    // web_ui.cc: the dashboard's files, reads and live feed
  void StopDashboard();      // web_ui.cc: ends the open live feeds
  void HistoryRoutes();      // history_api.cc: GET /v1/history
  void ServiceRoutes();      // service/service_api.cc: /v1/services
  void ReservationRoutes();  // http_api_reservations.cc: /v1/reservations
  void StepRoutes();         // http_api_steps.cc: GET /v1/jobs/ID/steps
  void SessionRoutes();      // http_api_sessions.cc: GET /v1/jobs/ID/sessions
  void MaintenanceRoutes();  // http_api_maintenance.cc: /v1/maintenance
  void GoodputRoutes();      // http_api_goodput.cc: /v1/jobs/ID/goodput, /v1/goodput
  void TopologyRoutes();     // http_api_topology.cc: /v1/topology/discovered, /v1/topology/diff
  std::shared_ptr<LiveFeed> feed_;
  std::unique_ptr<LogFollows> follows_;  // `logs -f`: log_follow.h
  // Who calls, and whether they hold `perm` (replies 401/403 and returns nullopt when not).
  std::optional<Principal> Authorize(const httplib::Request& req, httplib::Response& res,
                                     std::optional<Permission> perm);
  // Every route's door: a handler that authorizes the caller for `perm` (nullopt: any caller the
  // API knows) and then runs `fn` with who they are; a caller who may not is answered 401 or 403
  // with what to do, and `fn` never runs.
  using RouteFn =
      std::function<void(const Principal&, const httplib::Request&, httplib::Response&)>;
  httplib::Server::Handler Handle(std::optional<Permission> perm, RouteFn fn);
  // The connection layer's counts into /metrics (hangar_http_*).
  void ExportConnStats() HANGAR_EXCLUDES(export_mu_);
  struct ConnMetrics;
  // Made by the constructor; scrapes raise its counters under export_mu_.
  std::unique_ptr<ConnMetrics> conn_metrics_ HANGAR_PT_GUARDED_BY(export_mu_);
  std::unique_ptr<httplib::Server> server_;
  HttpServerControl* control_ = nullptr;  // server_'s connection layer
  std::thread thread_;
  std::unique_ptr<ImagePinner> pinner_;  // jobs accepted while their registry was down
  StateOwner* owner_;
  AgentHub* hub_;
  ControllerMetrics* metrics_;
  TokenBook* tokens_;
  // What the controller wires in before Start (the set_... calls above); read-only while serving.
  struct Wiring {
    bool dcgm_metrics = false;
    RequestGuard guard;
    std::function<nlohmann::json()> leader_info;
    HistoryOptions history;
    service::ServiceController* services = nullptr;
    struct Sessions {
      int port = 0;
      const SessionService* service = nullptr;
    } sessions;
    const StepRelay* steps = nullptr;
  } wiring_;
  Mutex export_mu_;
};

}  // namespace hangar::controller
