// The REST API's node routes (docs/api.md): GET /v1/nodes and /v1/nodes/NAME, drain and undrain,
// remediation, and the health safety valve's reset.
#include <httplib.h>

#include "api/body.h"
#include "api/views.h"
#include "controller/http_api.h"
#include "controller/http_api_internal.h"
#include "controller/state/cluster_state.h"
#include "controller/state_owner.h"

namespace hangar::controller {

using namespace http;  // NOLINT: the handlers' own helpers

void HttpApi::NodeRoutes() {
  httplib::Server& s = *server_;
  s.Get("/v1/nodes",
        Handle(Permission::kClusterRead,
               [this](const Principal&, const httplib::Request&, httplib::Response& res) {
                 auto nodes = owner_->Call<std::vector<api::NodeView>>(
                     [](ClusterState& st, Effects*) { return st.ListNodes(); });
                 nlohmann::json out = nlohmann::json::array();
                 for (const auto& n : nodes) out.push_back(api::ToJson(n));
                 Reply(res, 200, {{"nodes", out}});
               }));
  s.Get(R"(/v1/nodes/([^/]+))",
        Handle(Permission::kClusterRead,
               [this](const Principal& who, const httplib::Request& req, httplib::Response& res) {
                 std::string name = req.matches[1].str();
                 auto node = owner_->Call<StatusOr<api::NodeView>>(
                     [&](ClusterState& st, Effects*) { return st.GetNode(name); });
                 if (!node.ok()) return Reply(res, node.status());
                 nlohmann::json j = api::ToJson(*node);
                 auto events = owner_->Events("node/" + name, 50);
                 if (events.ok() && Allow(who, Permission::kEventsRead).ok()) {
                   nlohmann::json ev = nlohmann::json::array();
                   for (const auto& e : *events)
                     ev.push_back({{"time_ms", e.time}, {"kind", e.kind}, {"message", e.message}});
                   j["events"] = ev;
                 }
                 Reply(res, 200, j);
               }));
  auto drain = [this](bool on) {
    return Handle(Permission::kNodesDrain, [this, on](const Principal&, const httplib::Request& req,
                                                      httplib::Response& res) {
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
    });
  };
  BoundedPost(s, R"(/v1/nodes/([^/]+)/drain)", drain(true));
  BoundedPost(s, R"(/v1/nodes/([^/]+)/undrain)", drain(false));
  // Tasks a node runs that the store does not know (held since its agent registered).
  BoundedPost(
      s, R"(/v1/nodes/([^/]+)/orphans)",
      Handle(Permission::kNodesDrain, [this](const Principal&, const httplib::Request& req,
                                             httplib::Response& res) {
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
        const auto chosen = *decision == "stop" ? ClusterState::OrphanDecision::kStop
                                                : ClusterState::OrphanDecision::kRelease;
        Status st = owner_->Call<Status>([&](ClusterState& s, Effects* fx) {
          return s.DecideHeldOrphans(name, chosen, owner_->clock()->Now(), fx);
        });
        if (!st.ok()) return Reply(res, st);
        Reply(res, 200, {{"node", name}, {"decision", **decision}});
      }));
  BoundedPost(
      s, R"(/v1/nodes/([^/]+)/remediate)",
      Handle(Permission::kNodesDrain, [this](const Principal&, const httplib::Request& req,
                                             httplib::Response& res) {
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
      }));
  BoundedPost(s, "/v1/health/safety-valve/reset",
              Handle(Permission::kNodesDrain,
                     [this](const Principal&, const httplib::Request&, httplib::Response& res) {
                       owner_->Call<bool>([&](ClusterState& s, Effects* fx) {
                         s.ResetSafetyValve(owner_->clock()->Now(), fx);
                         return true;
                       });
                       Reply(res, 200, {{"safety_valve", "reset"}});
                     }));
}

}  // namespace hangar::controller
