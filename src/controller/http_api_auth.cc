// The REST API's routes for who is calling and what they did: whoami, tokens (make, list,
// rotate, revoke) and the audit log of every mutating call.
#include "api/body.h"
#include "controller/http_api.h"
#include "controller/http_api_internal.h"
#include "controller/redact.h"

namespace hangar::controller {

using namespace http;  // NOLINT: the handlers' own helpers

void HttpApi::AuthRoutes() {
  httplib::Server& s = *server_;
  // The audit log: every call that may change something, as answered.
  s.set_logger([this](const httplib::Request& req, const httplib::Response& res) {
    if (req.method == "GET" || req.method == "HEAD" || req.method == "OPTIONS") return;
    AuditRow row;
    row.time = owner_->clock()->Now();
    if (!tokens_) {
      row.user =
          req.has_header("X-Hangar-User") ? req.get_header_value("X-Hangar-User") : "anonymous";
      row.role = !wiring_.guard.dev_mode()          ? "admin (--auth none)"
                 : wiring_.guard.HoldsDevToken(req) ? "admin (the hangar dev token)"
                                                    : "none (no hangar dev token)";
    } else if (auto who = tokens_->Authenticate(
                   req.has_header("Authorization") ? req.get_header_value("Authorization") : "",
                   row.time);
               who.ok()) {
      row.user = who->user;
      row.role = std::string(RoleName(who->role));
    }
    row.method = req.method;
    row.path = RedactCredentials(req.target.empty() ? req.path : req.target);
    row.remote = req.remote_addr + ":" + std::to_string(req.remote_port);
    row.status = res.status;
    if (res.status >= 400) {
      auto body = nlohmann::json::parse(res.body, nullptr, false);
      if (body.is_object() && body.contains("error") && body["error"].is_object()) {
        row.message = body["error"].value("message", "");
      }
    }
    owner_->RecordAudit(std::move(row));
  });
  s.Get("/v1/audit",
        Handle(Permission::kAuditRead,
               [this](const Principal&, const httplib::Request& req, httplib::Response& res) {
                 int limit = 100;
                 if (req.has_param("limit")) {
                   auto n = api::ParseCount(req.get_param_value("limit"), "limit", 1, 10000);
                   if (!n.ok()) return Reply(res, n.status());
                   limit = static_cast<int>(*n);
                 }
                 const std::string user = req.has_param("user") ? req.get_param_value("user") : "";
                 auto rows = owner_->Audit(user, limit);
                 if (!rows.ok()) return Reply(res, rows.status());
                 nlohmann::json out = nlohmann::json::array();
                 for (const auto& a : *rows) {
                   out.push_back({{"id", a.id},
                                  {"time_ms", a.time},
                                  {"user", a.user},
                                  {"role", a.role},
                                  {"method", a.method},
                                  {"path", a.path},
                                  {"remote", a.remote},
                                  {"status", a.status},
                                  {"message", a.message}});
                 }
                 Reply(res, 200, {{"audit", out}});
               }));
  s.Get(
      "/v1/whoami", Handle(std::nullopt, [](const Principal& who, const httplib::Request&,
                                            httplib::Response& res) {
        nlohmann::json out = {
            {"user", who.user}, {"role", std::string(RoleName(who.role))}, {"open", who.open}};
        // Who this caller's tasks would run as (none with --auth none: the agents' own user).
        if (who.role == Role::kAdmin || who.role == Role::kQueueAdmin || who.role == Role::kUser) {
          out["run_as"] = TaskAccount(who).ToJson();
        }
        Reply(res, 200, out);
      }));
  BoundedPost(
      s, "/v1/tokens",
      Handle(Permission::kTokensManage, [this](const Principal&, const httplib::Request& req,
                                               httplib::Response& res) {
        if (!tokens_) {
          return Reply(res, Status::FailedPrecondition(
                                "this controller runs with --auth none: it takes no tokens; "
                                "restart it with --auth tokens"));
        }
        auto body = api::ParseObject(req.body, "{\"user\": \"alice\", \"role\": \"user\"}");
        if (!body.ok()) return Reply(res, body.status());
        auto user_field = api::OptString(*body, "user");
        auto node_field = api::OptString(*body, "node");
        auto role_field = api::OptString(*body, "role");
        auto ttl_field = api::OptString(*body, "ttl");
        for (const Status& bad :
             {user_field.status(), node_field.status(), role_field.status(), ttl_field.status()}) {
          if (!bad.ok()) return Reply(res, bad);
        }
        const std::string user = user_field->value_or(""), node = node_field->value_or("");
        auto role = ParseRole(role_field->value_or(""));
        if (!role)
          return Reply(res, Status::InvalidArgument(
                                "role must be admin, queue-admin, user, viewer or node"));
        if (*role == Role::kNode ? node.empty() : user.empty()) {
          return Reply(
              res, Status::InvalidArgument(*role == Role::kNode
                                               ? "a node token needs the node: --node NAME"
                                               : "a token needs the user it acts as: --user NAME"));
        }
        if (*role != Role::kNode) {
          if (Status name = CheckUserName(user); !name.ok()) return Reply(res, name);
        }
        // Who its jobs' tasks run as: an account the nodes resolve, or numbers; neither: the
        // account named like the user (docs/rbac.md).
        nlohmann::json account = nlohmann::json::object();
        for (const char* key : {"account", "uid", "gid", "groups"}) {
          if (body->contains(key)) account[key] = (*body)[key];
        }
        auto run_as = job::RunAs::FromJson(account);
        if (!run_as.ok()) return Reply(res, run_as.status());
        if (!run_as->account.empty()) {
          if (Status name = job::RunAs::CheckAccountName(run_as->account); !name.ok())
            return Reply(res, name);
        }
        if (!run_as->empty() && *role != Role::kAdmin && *role != Role::kQueueAdmin &&
            *role != Role::kUser) {
          return Reply(res, Status::InvalidArgument(
                                "a " + std::string(RoleName(*role)) +
                                " token submits no jobs, so it runs as no account; drop account, "
                                "uid, gid and groups"));
        }
        // People's tokens expire (90 days unless the request says otherwise; "never" for none);
        // node tokens do not unless asked, since an agent cannot renew its own.
        Duration ttl = *role == Role::kNode ? 0 : kDefaultTokenTtl;
        if (ttl_field->has_value() && **ttl_field != "never") {
          auto d = ParseDuration(**ttl_field);
          if (!d.ok() || *d <= 0) {
            return Reply(res, Status::InvalidArgument(
                                  "ttl must be a duration like 30d, 12h or 90m, or \"never\""));
          }
          ttl = *d;
        } else if (ttl_field->has_value()) {
          ttl = 0;
        }
        auto minted = owner_->Call<StatusOr<std::pair<TokenRecord, std::string>>>(
            [&](ClusterState& st, Effects* fx) -> StatusOr<std::pair<TokenRecord, std::string>> {
              if (*role == Role::kNode && !st.topology().FindNode(node)) {
                return Status::NotFound("node '" + node + "' is not in cluster.yaml");
              }
              auto m = TokenBook::Mint(*role == Role::kNode ? "node:" + node : user, *role, node,
                                       owner_->clock()->Now(), ttl);
              m.first.run_as = *run_as;
              fx->batch.values.push_back({"token", m.first.id, m.first.ToJson(true).dump(), false});
              fx->Event(owner_->clock()->Now(), "auth", "token/" + m.first.id,
                        "token made for " + m.first.user + " (" + std::string(RoleName(*role)) +
                            ")" + (run_as->empty() ? "" : ", tasks run as " + run_as->Describe()));
              return m;
            });
        if (!minted.ok()) return Reply(res, minted.status());
        tokens_->Put(minted->first);  // durable now
        nlohmann::json out = minted->first.ToJson(false);
        out["token"] = minted->second;
        Reply(res, 201, out);
      }));
  // Rotation: a new secret for the same user, role and node (and the same lifetime), and the old
  // token revoked in the same commit. An expired token may be rotated; a revoked one may not.
  BoundedPost(
      s, R"(/v1/tokens/([0-9a-f]+)/rotate)",
      Handle(Permission::kTokensManage, [this](const Principal&, const httplib::Request& req,
                                               httplib::Response& res) {
        const std::string id = req.matches[1].str();
        auto old = tokens_ ? tokens_->Find(id) : std::nullopt;
        if (!old || old->revoked) {
          return Reply(res, Status::NotFound("no token " + id + " to rotate" +
                                             (old ? " (it was revoked)" : "") +
                                             "; `hangar token list` lists them"));
        }
        const Time now = owner_->clock()->Now();
        // Not a structured binding: clang 14 cannot capture those in the lambda below.
        auto minted = TokenBook::Mint(old->user, old->role, old->node, now,
                                      old->expires ? old->expires - old->created : 0);
        auto& fresh = minted.first;
        auto& secret = minted.second;
        fresh.run_as = old->run_as;  // its jobs run as the same account
        auto revoked = tokens_->Revoke(id, now, fresh.id);
        if (!revoked) return Reply(res, Status::NotFound("token " + id + " was revoked meanwhile"));
        owner_->Call<int>([&](ClusterState&, Effects* fx) {
          fx->batch.values.push_back({"token", fresh.id, fresh.ToJson(true).dump(), false});
          fx->batch.values.push_back({"token", id, revoked->ToJson(true).dump(), false});
          fx->Event(now, "auth", "token/" + id, "token rotated: " + fresh.id + " replaces it");
          return 0;
        });
        tokens_->Put(fresh);
        hub_->CloseStreamsOf(id);
        nlohmann::json out = fresh.ToJson(false);
        out["token"] = secret;
        out["replaces"] = id;
        Reply(res, 201, out);
      }));
  s.Get("/v1/tokens",
        Handle(Permission::kTokensManage,
               [this](const Principal&, const httplib::Request&, httplib::Response& res) {
                 nlohmann::json out = nlohmann::json::array();
                 if (tokens_) {
                   for (const auto& t : tokens_->List()) out.push_back(t.ToJson(false));
                 }
                 Reply(res, 200, {{"tokens", out}});
               }));
  s.Delete(R"(/v1/tokens/([0-9a-f]+))",
           Handle(Permission::kTokensManage, [this](const Principal&, const httplib::Request& req,
                                                    httplib::Response& res) {
             const std::string id = req.matches[1].str();
             auto revoked = tokens_ ? tokens_->Revoke(id, owner_->clock()->Now()) : std::nullopt;
             if (!revoked)
               return Reply(res, Status::NotFound("no live token " + id +
                                                  "; `hangar token list` lists them"));
             // Kept, marked revoked: whoever still holds it is told so, not "unknown".
             owner_->Call<int>([&](ClusterState&, Effects* fx) {
               fx->batch.values.push_back({"token", id, revoked->ToJson(true).dump(), false});
               fx->Event(owner_->clock()->Now(), "auth", "token/" + id, "token revoked");
               return 0;
             });
             hub_->CloseStreamsOf(
                 id);  // an agent on this token is cut off now, not at its next reconnect
             Reply(res, 200, {{"id", id}, {"revoked", true}});
           }));
}

}  // namespace hangar::controller
