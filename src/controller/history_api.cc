// GET /v1/history (docs/api.md): the cluster's load over a range back from now, from the history
// the controller keeps in its store (history.h). Anyone who may read the cluster may read it.
#include <httplib.h>

#include "controller/history.h"
#include "controller/http_api.h"
#include "controller/http_api_internal.h"

namespace hangar::controller {

namespace {

// `name`=DURATION from the query, or `fallback` when absent.
StatusOr<Duration> DurationParam(const httplib::Request& req, const char* name, Duration fallback,
                                 const char* example) {
  if (!req.has_param(name)) return fallback;
  auto d = ParseDuration(req.get_param_value(name));
  if (!d.ok() || *d <= 0) {
    return Status::InvalidArgument(std::string(name) + " must be a positive duration, like " +
                                   example);
  }
  return *d;
}

}  // namespace

void HttpApi::HistoryRoutes() {
  server_->Get(
      "/v1/history",
      Handle(Permission::kClusterRead, [this](const Principal&, const httplib::Request& req,
                                              httplib::Response& res) {
        auto range = DurationParam(req, "since", 6 * kHour, "6h, 24h or 7d (back from now)");
        if (!range.ok()) return http::Reply(res, range.status());
        auto step = DurationParam(req, "step", DefaultStep(wiring_.history, *range), "5m or 1h");
        if (!step.ok()) return http::Reply(res, step.status());
        if (*step < kSecond || *range / *step > 10'000) {
          return http::Reply(
              res, Status::InvalidArgument(
                       "step " + req.get_param_value("step") +
                       " makes over 10,000 points of that range; ask for a step of at least " +
                       std::to_string((*range / 10'000 + kSecond - 1) / kSecond) + "s"));
        }
        const Time now = owner_->clock()->Now();
        const Time since = now - *range;
        auto hourly = owner_->History(true, since);
        if (!hourly.ok()) return http::Reply(res, hourly.status());
        auto samples = owner_->History(false, since);
        if (!samples.ok()) return http::Reply(res, samples.status());
        http::Reply(res, 200,
                    HistoryJson(wiring_.history, since, now, *step,
                                Bucket(*hourly, *samples, since, *step)));
      }));
}

}  // namespace hangar::controller
