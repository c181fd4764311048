// REST routes for services (docs/api.md, docs/services.md): create, list, get, explain, endpoints,
// update, scale, rollback, delete. A service file comes as its text (YAML or JSON), or as
// {"spec": TEXT, "base": DIR} when its relative workdirs are the file's folder's (the CLI's form).
#include <httplib.h>

#include <filesystem>

#include "api/body.h"
#include "controller/http_api.h"
#include "controller/http_api_internal.h"
#include "controller/service/service_controller.h"

namespace hangar::controller {

using namespace http;  // NOLINT: the handlers' own helpers

namespace {

constexpr const char* kName = "([a-z][a-z0-9-]{0,39})";

Status NoServices() {
  return Status::FailedPrecondition(
      "this controller runs no load balancer for services; start it with --service-lb (see "
      "docs/services.md; "
      "`hangar dev` starts one when haproxy is installed)");
}

StatusOr<service::ServiceSpec> SpecFromBody(const httplib::Request& req) {
  HANGAR_RETURN_IF_ERROR(api::CheckUtf8(req.body, "the service file"));
  HANGAR_RETURN_IF_ERROR(api::CheckNesting(req.body, "the service file"));
  std::string text = req.body, base;
  auto j = nlohmann::json::parse(req.body, nullptr, false);
  if (!j.is_discarded() && j.is_object() && j.contains("spec") && j["spec"].is_string()) {
    text = j["spec"].get<std::string>();
    base = j.value("base", "");
    if (!base.empty() && !std::filesystem::path(base).is_absolute()) {
      return Status::InvalidArgument("base must be an absolute folder (the service file's)");
    }
  }
  HANGAR_ASSIGN_OR_RETURN(service::ServiceSpec spec,
                          service::ParseServiceSpec(text, "request body"));
  if (!base.empty()) job::ResolveWorkdirs(&spec.replica, base);
  HANGAR_RETURN_IF_ERROR(job::RequireAbsoluteWorkdirs(spec.replica));
  if (spec.replica.tasks[0].command.empty()) {
    return Status::InvalidArgument(
        "the replica's task group has no command; give it command: [program, args...]");
  }
  return spec;
}

int Count(const std::string& body, const char* key, int missing) {
  auto j = nlohmann::json::parse(body, nullptr, false);
  if (j.is_discarded() || !j.is_object() || !j.contains(key)) return missing;
  return j[key].is_number_integer() ? j[key].get<int>() : -1;
}

}  // namespace

void HttpApi::ServiceRoutes() {
  httplib::Server& s = *server_;
  // Create and update: the caller's identity and account go into the replica's job, as for a job.
  auto write = [this](bool create) {
    return Handle(
        Permission::kJobsSubmit,
        [this, create](const Principal& who, const httplib::Request& req, httplib::Response& res) {
          if (!wiring_.services) return Reply(res, NoServices());
          auto spec = SpecFromBody(req);
          if (!spec.ok()) return Reply(res, spec.status());
          if (!create && spec->name != req.matches[1].str()) {
            return Reply(res, Status::InvalidArgument("the file names service '" + spec->name +
                                                      "', not '" + req.matches[1].str() + "'"));
          }
          spec->replica.user = who.user;
          spec->replica.run_as = TaskAccount(who);
          Status may = owner_->Call<Status>(
              [&](ClusterState& st, Effects*) { return st.MaySubmit(who, spec->replica.queue); });
          if (!may.ok()) return Reply(res, may);
          const bool admin = who.open || who.role == Role::kAdmin;
          if (create) {
            Status made = wiring_.services->Create(*spec, who.user);
            if (!made.ok()) return Reply(res, made);
            return Reply(res, 201, *wiring_.services->Get(spec->name));
          }
          auto rev = wiring_.services->Update(*spec, who.user, admin);
          if (!rev.ok()) return Reply(res, rev.status());
          Reply(res, 200, {{"name", spec->name}, {"revision", *rev}});
        });
  };
  BoundedPost(s, "/v1/services", write(true));
  BoundedPost(s, std::string("/v1/services/") + kName + "/update", write(false));
  s.Get("/v1/services",
        Handle(Permission::kJobsRead,
               [this](const Principal&, const httplib::Request&, httplib::Response& res) {
                 if (!wiring_.services)
                   return Reply(res, 200, {{"services", nlohmann::json::array()}});
                 Reply(res, 200, {{"services", wiring_.services->List()}});
               }));
  s.Get(std::string("/v1/services/") + kName,
        Handle(Permission::kJobsRead,
               [this](const Principal&, const httplib::Request& req, httplib::Response& res) {
                 if (!wiring_.services) return Reply(res, NoServices());
                 auto v = wiring_.services->Get(req.matches[1].str());
                 if (!v.ok()) return Reply(res, v.status());
                 Reply(res, 200, *v);
               }));
  s.Get(std::string("/v1/services/") + kName + "/explain",
        Handle(Permission::kJobsRead,
               [this](const Principal&, const httplib::Request& req, httplib::Response& res) {
                 if (!wiring_.services) return Reply(res, NoServices());
                 auto v = wiring_.services->Explain(req.matches[1].str());
                 if (!v.ok()) return Reply(res, v.status());
                 Reply(res, 200, *v);
               }));
  s.Get(std::string("/v1/services/") + kName + "/endpoints",
        Handle(Permission::kJobsRead,
               [this](const Principal&, const httplib::Request& req, httplib::Response& res) {
                 if (!wiring_.services) return Reply(res, NoServices());
                 auto v = wiring_.services->Endpoints(req.matches[1].str());
                 if (!v.ok()) return Reply(res, v.status());
                 Reply(res, 200, *v);
               }));
  BoundedPost(
      s, std::string("/v1/services/") + kName + "/scale",
      Handle(Permission::kJobsSubmit,
             [this](const Principal& who, const httplib::Request& req, httplib::Response& res) {
               if (!wiring_.services) return Reply(res, NoServices());
               const int n = Count(req.body, "replicas", -1);
               if (n < 0)
                 return Reply(res, Status::InvalidArgument("give the count as {\"replicas\": 3}"));
               const std::string name = req.matches[1].str();
               Status st =
                   wiring_.services->Scale(name, n, who.user, who.open || who.role == Role::kAdmin);
               if (!st.ok()) return Reply(res, st);
               Reply(res, 200, {{"name", name}, {"replicas", n}});
             }));
  BoundedPost(
      s, std::string("/v1/services/") + kName + "/rollback",
      Handle(Permission::kJobsSubmit, [this](const Principal& who, const httplib::Request& req,
                                             httplib::Response& res) {
        if (!wiring_.services) return Reply(res, NoServices());
        const int to = req.body.empty() ? 0 : Count(req.body, "revision", 0);
        if (to < 0)
          return Reply(
              res, Status::InvalidArgument(
                       "give the revision as {\"revision\": 2}, or nothing for the last good one"));
        const std::string name = req.matches[1].str();
        auto rev =
            wiring_.services->Rollback(name, to, who.user, who.open || who.role == Role::kAdmin);
        if (!rev.ok()) return Reply(res, rev.status());
        Reply(res, 200, {{"name", name}, {"revision", *rev}});
      }));
  s.Delete(std::string("/v1/services/") + kName,
           Handle(Permission::kJobsCancel, [this](const Principal& who, const httplib::Request& req,
                                                  httplib::Response& res) {
             if (!wiring_.services) return Reply(res, NoServices());
             const std::string name = req.matches[1].str();
             Status st =
                 wiring_.services->Delete(name, who.user, who.open || who.role == Role::kAdmin);
             if (!st.ok()) return Reply(res, st);
             Reply(res, 200, {{"name", name}, {"state", "deleting"}});
           }));
}

}  // namespace hangar::controller
