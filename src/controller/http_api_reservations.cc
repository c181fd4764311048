// The REST API's routes for reservations and maintenance windows (docs/reservations.md):
// POST /v1/reservations books one, GET lists them, DELETE /v1/reservations/NAME ends one now.
#include "api/body.h"
#include "controller/http_api.h"
#include "controller/http_api_internal.h"

namespace hangar::controller {

using namespace http;  // NOLINT: the handlers' own helpers

void HttpApi::ReservationRoutes() {
  httplib::Server& s = *server_;
  BoundedPost(
      s, "/v1/reservations",
      Handle(Permission::kNodesDrain, [this](const Principal& who, const httplib::Request& req,
                                             httplib::Response& res) {
        auto body = api::ParseObject(
            req.body,
            "{\"name\": \"maint1\", \"nodes\": \"node-[1-2]\", \"start\": "
            "\"2027-01-04T10:00:00Z\", \"duration\": \"1h\", \"maintenance\": true}");
        if (!body.ok()) return Reply(res, body.status());
        auto made = owner_->Call<StatusOr<nlohmann::json>>([&](ClusterState& st, Effects* fx) {
          return st.CreateReservation(who, *body, owner_->clock()->Now(), fx);
        });
        if (!made.ok()) return Reply(res, made.status());
        Reply(res, 200, *made);
      }));
  s.Get("/v1/reservations",
        Handle(Permission::kClusterRead,
               [this](const Principal&, const httplib::Request&, httplib::Response& res) {
                 Reply(res, 200, owner_->Call<nlohmann::json>([this](ClusterState& st, Effects*) {
                   return st.ReservationsJson(owner_->clock()->Now());
                 }));
               }));
  s.Delete(R"(/v1/reservations/([^/]+))",
           Handle(Permission::kNodesDrain, [this](const Principal& who, const httplib::Request& req,
                                                  httplib::Response& res) {
             const std::string name = req.matches[1].str();
             Status st = owner_->Call<Status>([&](ClusterState& s, Effects* fx) {
               return s.DeleteReservation(name, who, owner_->clock()->Now(), fx);
             });
             if (!st.ok()) return Reply(res, st);
             Reply(res, 200, {{"name", name}, {"deleted", true}});
           }));
}

}  // namespace hangar::controller
