// The dashboard's routes on the REST server (HttpApi::DashboardRoutes): the app at / and /ui/...,
// its reads under /v1/dashboard/ (RBAC as on the rest of the API) and the live feed.
#include "controller/web_ui.h"

#include <httplib.h>

#include <array>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <optional>

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

// Sends `body`, or `gzip` (its gzip, when not empty) to a client that takes gzip, through a sized
// content provider: cpp-httplib writes that as it is. A body set with set_content() it would
// compress itself, with Brotli at quality 11 for any client that accepts br (every browser):
// 2-3 s for the 1 MB map, 0.1-0.5 s for a 100 kB answer, 10-40 ms for each of the app's files.
// `keep` owns the bytes until the response is written.
void Send(const httplib::Request& req, httplib::Response& res, std::string_view body,
          std::string_view gzip, const std::string& type, std::shared_ptr<const void> keep) {
  res.set_header("Vary", "Accept-Encoding");
  std::string_view out = body;
  if (!gzip.empty() && req.get_header_value("Accept-Encoding").find("gzip") != std::string::npos) {
    res.set_header("Content-Encoding", "gzip");
    out = gzip;
  }
  res.set_content_provider(
      out.size(), type,
      [out, keep = std::move(keep)](size_t offset, size_t length, httplib::DataSink& sink) {
        return sink.write(out.data() + offset, length);
      });
}

// The app's files gzipped once (level 9), the first time one is asked for.
const std::vector<std::string>& GzippedAssets() {
  static const std::vector<std::string> gz = [] {
    std::vector<std::string> out;
    for (const web::Asset& a : web::Assets()) out.push_back(web::Gzip(a.body, 9));
    return out;
  }();
  return gz;
}

void ServeAsset(const httplib::Request& req, const std::string& path, httplib::Response& res) {
  const web::Asset* a = web::FindAsset(path);
  if (!a) {
    return http::Reply(
        res, Status::NotFound("the dashboard has no file " + path + "; open / for the dashboard"));
  }
  res.set_header("Content-Security-Policy", kPolicy);
  res.set_header("X-Content-Type-Options", "nosniff");
  res.set_header("Cache-Control", "no-cache");
  const std::string& gz = GzippedAssets()[static_cast<size_t>(a - web::Assets().data())];
  Send(req, res, a->body, gz, std::string(web::ContentTypeOf(path)), nullptr);
}

StatusOr<size_t> CountParam(const httplib::Request& req, const char* name, size_t fallback,
                            int64_t max) {
  if (!req.has_param(name)) return fallback;
  auto n = api::ParseCount(req.get_param_value(name), name, 0, max);
  if (!n.ok()) return n.status();
  return static_cast<size_t>(*n);
}

void ReplyJson(const httplib::Request& req, httplib::Response& res, const nlohmann::json& j) {
  auto text = std::make_shared<std::array<std::string, 2>>();
  (*text)[0] = api::SafeDump(j) + "\n";
  if ((*text)[0].size() >= 1024) (*text)[1] = web::Gzip((*text)[0]);
  res.status = 200;
  Send(req, res, (*text)[0], (*text)[1], "application/json", text);
}

// Where the map's time went, for the browser's resource timing (the render benchmark reads it).
std::string ServerTiming(const LiveFeed::Snapshot& s) {
  const double age =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - s.at).count();
  char buf[160];
  std::snprintf(buf, sizeof(buf), "state;dur=%.1f, collect;dur=%.1f, encode;dur=%.1f, age;dur=%.0f",
                s.state_ms, s.collect_ms, s.encode_ms, age);
  return buf;
}

}  // namespace

void HttpApi::DashboardRoutes() {
  httplib::Server& s = *server_;
  feed_ = std::make_shared<LiveFeed>(owner_);
  s.Get("/", [](const httplib::Request& req, httplib::Response& res) {
    ServeAsset(req, "index.html", res);
  });
  s.Get(R"(/ui/([A-Za-z0-9_.-]+))", [](const httplib::Request& req, httplib::Response& res) {
    ServeAsset(req, req.matches[1].str(), res);
  });
  s.Get("/v1/dashboard/map",
        Handle(Permission::kClusterRead,
               [this](const Principal&, const httplib::Request& req, httplib::Response& res) {
                 const auto snap = feed_->Map();
                 if (!snap)
                   return http::Reply(res, Status::Unavailable("the controller is stopping"));
                 res.set_header("Server-Timing", ServerTiming(*snap));
                 res.status = 200;
                 Send(req, res, snap->body, snap->gzip, "application/json", snap);
               }));
  s.Get("/v1/dashboard/queue",
        Handle(Permission::kJobsRead,
               [this](const Principal& who, const httplib::Request& req, httplib::Response& res) {
                 auto offset = CountParam(req, "offset", 0, 100'000'000);
                 auto limit = CountParam(req, "limit", 500, 100'000);
                 if (!offset.ok()) return http::Reply(res, offset.status());
                 if (!limit.ok()) return http::Reply(res, limit.status());
                 ReplyJson(req, res, owner_->Call<nlohmann::json>([&](ClusterState& st, Effects*) {
                   return web::QueueJson(st, who, *offset, *limit);
                 }));
               }));
  s.Get("/v1/dashboard/feed",
        Handle(Permission::kClusterRead,
               [this](const Principal&, const httplib::Request& req, httplib::Response& res) {
                 std::optional<uint64_t> since;
                 if (req.has_param("since")) {
                   auto n = api::ParseCount(req.get_param_value("since"), "since", 0, INT64_MAX);
                   if (!n.ok()) return http::Reply(res, n.status());
                   since = static_cast<uint64_t>(*n);
                 }
                 auto sink = control_->TakeStream(
                     StreamHead{"text/event-stream",
                                true,
                                {{"Cache-Control", "no-store"}, {"X-Accel-Buffering", "no"}}});
                 if (!sink.ok()) return http::Reply(res, sink.status());
                 feed_->Open(*std::move(sink), since);
               }));
}

void HttpApi::StopDashboard() {
  if (feed_) feed_->Stop();
}

}  // namespace hangar::controller
