// The REST API's queue routes (docs/queues.md): POST and GET /v1/queues, GET /v1/share (fair
// share) and GET /v1/usage (accounting by user, queue or account).
#include <httplib.h>

#include "api/body.h"
#include "controller/http_api.h"
#include "controller/http_api_internal.h"
#include "controller/state/cluster_state.h"
#include "controller/state_owner.h"
#include "job/queue_spec.h"

namespace hangar::controller {

using namespace http;  // NOLINT: the handlers' own helpers

void HttpApi::QueueRoutes() {
  httplib::Server& s = *server_;
  BoundedPost(s, "/v1/queues",
              Handle(Permission::kQueuesApply,
                     [this](const Principal&, const httplib::Request& req, httplib::Response& res) {
                       Status readable = api::CheckUtf8(req.body, "the queues file");
                       if (readable.ok()) readable = api::CheckNesting(req.body, "the queues file");
                       if (!readable.ok()) return Reply(res, readable);
                       auto specs = job::ParseQueues(req.body, "queues file");
                       if (!specs.ok()) return Reply(res, specs.status());
                       auto summary = owner_->Call<StatusOr<nlohmann::json>>(
                           [&](ClusterState& st, Effects* fx) -> StatusOr<nlohmann::json> {
                             nlohmann::json out;
                             HANGAR_RETURN_IF_ERROR(
                                 st.ApplyQueues(*specs, owner_->clock()->Now(), fx, &out));
                             return out;
                           });
                       if (!summary.ok()) return Reply(res, summary.status());
                       Reply(res, 200, *summary);
                     }));
  s.Get("/v1/queues",
        Handle(Permission::kClusterRead,
               [this](const Principal&, const httplib::Request&, httplib::Response& res) {
                 Reply(res, 200, owner_->Call<nlohmann::json>([](ClusterState& st, Effects*) {
                   return st.QueuesJson();
                 }));
               }));
  s.Get("/v1/share",
        Handle(Permission::kClusterRead,
               [this](const Principal&, const httplib::Request&, httplib::Response& res) {
                 Reply(res, 200, owner_->Call<nlohmann::json>([this](ClusterState& st, Effects*) {
                   return st.ShareJson(owner_->clock()->Now());
                 }));
               }));
  s.Get("/v1/usage",
        Handle(Permission::kUsageRead, [this](const Principal& who, const httplib::Request& req,
                                              httplib::Response& res) {
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
            return st.UsageJsonFor(who, by, now - window, now);
          });
          if (!out.ok()) return Reply(res, out.status());
          Reply(res, 200, *out);
        }));
}

}  // namespace hangar::controller
