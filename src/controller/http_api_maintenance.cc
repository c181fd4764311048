// The REST API's routes for rolling maintenance (docs/maintenance.md): POST /v1/maintenance starts
// a run (admins: nodes:drain; audited as every mutating call), GET /v1/maintenance lists the runs,
// GET /v1/maintenance/latest and /v1/maintenance/ID show one with every node, and POST
// /v1/maintenance/ID/cancel stops one where it is.
#include "api/body.h"
#include "controller/http_api.h"
#include "controller/http_api_internal.h"

namespace hangar::controller {

using namespace http;  // NOLINT: the handlers' own helpers

namespace {
constexpr const char* kExample =
    "{\"nodes\": \"node-[1-16]\", \"batch\": 4, \"run\": \"/opt/fw/update.sh\", \"timeout\": "
    "\"1h\"}";

StatusOr<uint64_t> RunId(const std::string& text) {
  if (text == "latest") return uint64_t{0};
  auto n = api::ParseCount(text, "the maintenance run's id", 1, int64_t{1} << 53);
  if (!n.ok()) return n.status();
  return static_cast<uint64_t>(*n);
}
}  // namespace

void HttpApi::MaintenanceRoutes() {
  httplib::Server& s = *server_;
  BoundedPost(
      s, "/v1/maintenance",
      Handle(Permission::kNodesDrain, [this](const Principal& who, const httplib::Request& req,
                                             httplib::Response& res) {
        auto body = api::ParseObject(req.body, kExample);
        if (!body.ok()) return Reply(res, body.status());
        auto made = owner_->Call<StatusOr<nlohmann::json>>([&](ClusterState& st, Effects* fx) {
          return st.StartMaintenance(who, *body, owner_->clock()->Now(), fx);
        });
        if (!made.ok()) return Reply(res, made.status());
        Reply(res, 201, *made);
      }));
  s.Get("/v1/maintenance",
        Handle(Permission::kClusterRead,
               [this](const Principal&, const httplib::Request&, httplib::Response& res) {
                 Reply(res, 200, owner_->Call<nlohmann::json>([](ClusterState& st, Effects*) {
                   return st.MaintenanceListJson();
                 }));
               }));
  s.Get(R"(/v1/maintenance/([^/]+))",
        Handle(Permission::kClusterRead,
               [this](const Principal&, const httplib::Request& req, httplib::Response& res) {
                 auto id = RunId(req.matches[1].str());
                 if (!id.ok()) return Reply(res, id.status());
                 auto run = owner_->Call<StatusOr<nlohmann::json>>(
                     [&](ClusterState& st, Effects*) { return st.MaintenanceJson(*id); });
                 if (!run.ok()) return Reply(res, run.status());
                 Reply(res, 200, *run);
               }));
  BoundedPost(
      s, R"(/v1/maintenance/([^/]+)/cancel)",
      Handle(Permission::kNodesDrain,
             [this](const Principal& who, const httplib::Request& req, httplib::Response& res) {
               auto id = RunId(req.matches[1].str());
               if (!id.ok()) return Reply(res, id.status());
               Status st = owner_->Call<Status>([&](ClusterState& s, Effects* fx) {
                 return s.CancelMaintenance(*id, who, owner_->clock()->Now(), fx);
               });
               if (!st.ok()) return Reply(res, st);
               Reply(res, 200, {{"id", *id}, {"cancelled", true}});
             }));
}

}  // namespace hangar::controller
