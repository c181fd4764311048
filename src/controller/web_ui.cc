// The dashboard's routes on the REST server (HttpApi::DashboardRoutes): the app at / and /ui/...,
// its reads under /v1/dashboard/ (RBAC as on the rest of the API) and the live feed.
#include "controller/web_ui.h"

#include <httplib.h>

#include "api/body.h"
#include "controller/http_api.h"
#include "controller/http_api_internal.h"
#include "controller/live_feed.h"

namespace hangar::controller {

namespace web {

const Asset* FindAsset(std::string_view path) {
  for (const Asset& a : Assets()) {
    if (a.path == path) return &a;
  }
  return nullptr;
}

std::string_view ContentTypeOf(std::string_view path) {
  auto ends = [&](std::string_view ext) {
    return path.size() >= ext.size() && path.substr(path.size() - ext.size()) == ext;
  };
  if (ends(".html")) return "text/html; charset=utf-8";
  if (ends(".js")) return "text/javascript; charset=utf-8";
  if (ends(".css")) return "text/css; charset=utf-8";
  if (ends(".svg")) return "image/svg+xml";
  if (ends(".json")) return "application/json";
  return "text/plain; charset=utf-8";
}

}  // namespace web

namespace {

// Everything the page loads comes from this controller: no CDN, no external font, no inline script.
constexpr const char* kPolicy =
    "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; connect-src "
    "'self'; "
    "frame-ancestors 'none'";

void ServeAsset(const std::string& path, httplib::Response& res) {
  const web::Asset* a = web::FindAsset(path);
  if (!a) {
    return http::Reply(
        res, Status::NotFound("the dashboard has no file " + path + "; open / for the dashboard"));
  }
  res.set_header("Content-Security-Policy", kPolicy);
  res.set_header("X-Content-Type-Options", "nosniff");
  res.set_header("Cache-Control", "no-cache");
  res.set_content(std::string(a->body), std::string(web::ContentTypeOf(path)));
}

StatusOr<size_t> CountParam(const httplib::Request& req, const char* name, size_t fallback,
                            int64_t max) {
  if (!req.has_param(name)) return fallback;
  auto n = api::ParseCount(req.get_param_value(name), name, 0, max);
  if (!n.ok()) return n.status();
  return static_cast<size_t>(*n);
}

}  // namespace

void HttpApi::DashboardRoutes() {
  httplib::Server& s = *server_;
  feed_ = std::make_shared<LiveFeed>(owner_);
  s.Get("/",
        [](const httplib::Request&, httplib::Response& res) { ServeAsset("index.html", res); });
  s.Get(R"(/ui/([A-Za-z0-9_.-]+))", [](const httplib::Request& req, httplib::Response& res) {
    ServeAsset(req.matches[1].str(), res);
  });
  s.Get("/v1/dashboard/map", [this](const httplib::Request& req, httplib::Response& res) {
    if (!Authorize(req, res, Permission::kClusterRead)) return;
    http::Reply(res, 200, feed_->Map());
  });
  s.Get("/v1/dashboard/queue", [this](const httplib::Request& req, httplib::Response& res) {
    auto who = Authorize(req, res, Permission::kJobsRead);
    if (!who) return;
    auto offset = CountParam(req, "offset", 0, 100'000'000);
    auto limit = CountParam(req, "limit", 500, 100'000);
    if (!offset.ok()) return http::Reply(res, offset.status());
    if (!limit.ok()) return http::Reply(res, limit.status());
    http::Reply(res, 200, owner_->Call<nlohmann::json>([&](ClusterState& st, Effects*) {
      return web::QueueJson(st, *who, *offset, *limit);
    }));
  });
  s.Get("/v1/dashboard/feed", [this](const httplib::Request& req, httplib::Response& res) {
    if (!Authorize(req, res, Permission::kClusterRead)) return;
    feed_->Serve(res);
  });
}

void HttpApi::StopDashboard() {
  if (feed_) feed_->Stop();
}

}  // namespace hangar::controller
