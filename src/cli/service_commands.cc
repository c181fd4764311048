// `hangar service create|list|get|update|scale|rollback|delete|lb-config` (docs/services.md).
#include "cli/service_commands.h"

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "cli/cli_common.h"
#include "cli/client.h"
#include "cli/table.h"
#include "common/time.h"
#include "controller/service/haproxy_config.h"

namespace hangar::cli {
namespace {

// One options struct per command.
struct FileOptions {
  std::string file;
  std::string name;  // update: the service (must match the file's)
};
struct NameOptions {
  std::string name;
};
struct ScaleOptions {
  std::string name;
  int replicas = -1;
};
struct RollbackOptions {
  std::string name;
  int revision = 0;
};
struct LbConfigOptions {
  std::string layout;
};

// The file's text and its folder, which relative workdirs are resolved against on the server.
StatusOr<std::string> FileBody(const std::string& file) {
  std::ifstream in(file);
  if (!in) return Status::NotFound(file + ": cannot open the service file; check the path");
  std::stringstream ss;
  ss << in.rdbuf();
  std::error_code ec;
  const std::string base =
      std::filesystem::absolute(std::filesystem::path(file), ec).parent_path().string();
  return nlohmann::json{{"spec", ss.str()}, {"base", base}}.dump();
}

std::string Path(const std::string& name, const std::string& rest = "") {
  return "/v1/services/" + name + rest;
}

void PrintService(const nlohmann::json& s) {
  std::printf("name:      %s\nendpoint:  %s\nreplicas:  %d ready of %d\nrevision:  %d (%s)%s\n",
              EscapeControl(s.value("name", "")).c_str(), s.value("endpoint", "").c_str(),
              s.value("ready", 0), s.value("desired", 0), s.value("revision", 0),
              s.value("rollout", "").c_str(),
              s.value("last_good", 0)
                  ? (", last good " + std::to_string(s.value("last_good", 0))).c_str()
                  : "");
  if (!s.value("message", "").empty())
    std::printf("note:      %s\n", EscapeControl(s["message"].get<std::string>()).c_str());
  Table replicas({"REPLICA", "REVISION", "STATE", "ADDRESS", "JOB", "RESTARTS", "WHY"});
  for (const auto& r : s["replicas"]) {
    replicas.Add({std::to_string(r.value("id", 0)), std::to_string(r.value("revision", 0)),
                  r.value("state", ""), r.value("address", ""), std::to_string(r.value("job", 0)),
                  std::to_string(r.value("restarts", 0)), r.value("why", "")});
  }
  std::printf("\n%s", replicas.Render().c_str());
  Table revisions({"REVISION", "STATE", "CREATED", "COMMAND", "NOTE"});
  for (const auto& r : s["revisions"]) {
    std::string command;
    for (const auto& a : r.value("command", nlohmann::json::array()))
      command += (command.empty() ? "" : " ") + a.get<std::string>();
    revisions.Add({std::to_string(r.value("revision", 0)), r.value("state", ""),
                   FormatUtcTimestamp(r.value("created_ms", 0LL)), command, r.value("note", "")});
  }
  std::printf("\n%s", revisions.Render().c_str());
}

Status Create(const Common& c, const FileOptions& o) {
  HANGAR_ASSIGN_OR_RETURN(const std::string body, FileBody(o.file));
  HANGAR_ASSIGN_OR_RETURN(auto r, ApiClient(c.server).Post("/v1/services", body));
  if (c.output == "json") return PrintJson(r), Status::Ok();
  std::printf("created service %s (revision 1): endpoint %s\n", r.value("name", "").c_str(),
              r.value("endpoint", "").c_str());
  return Status::Ok();
}

Status Update(const Common& c, const FileOptions& o) {
  HANGAR_ASSIGN_OR_RETURN(const std::string body, FileBody(o.file));
  HANGAR_ASSIGN_OR_RETURN(auto r, ApiClient(c.server).Post(Path(o.name, "/update"), body));
  if (c.output == "json") return PrintJson(r), Status::Ok();
  std::printf("service %s: rolling out revision %d\n", o.name.c_str(), r.value("revision", 0));
  return Status::Ok();
}

Status List(const Common& c) {
  HANGAR_ASSIGN_OR_RETURN(auto r, ApiClient(c.server).Get("/v1/services"));
  if (c.output == "json") return PrintJson(r), Status::Ok();
  Table t({"NAME", "ENDPOINT", "READY", "REVISION", "ROLLOUT", "USER"});
  for (const auto& s : r["services"]) {
    t.Add({s.value("name", ""), s.value("endpoint", ""),
           std::to_string(s.value("ready", 0)) + "/" + std::to_string(s.value("desired", 0)),
           std::to_string(s.value("revision", 0)), s.value("rollout", ""), s.value("user", "")});
  }
  std::printf("%s", t.Render().c_str());
  return Status::Ok();
}

Status Get(const Common& c, const NameOptions& o) {
  HANGAR_ASSIGN_OR_RETURN(auto r, ApiClient(c.server).Get(Path(o.name)));
  if (c.output == "json") return PrintJson(r), Status::Ok();
  PrintService(r);
  return Status::Ok();
}

Status Scale(const Common& c, const ScaleOptions& o) {
  HANGAR_ASSIGN_OR_RETURN(
      auto r, ApiClient(c.server).Post(Path(o.name, "/scale"),
                                       nlohmann::json{{"replicas", o.replicas}}.dump()));
  if (c.output == "json") return PrintJson(r), Status::Ok();
  std::printf("service %s: %d replicas wanted\n", o.name.c_str(), o.replicas);
  return Status::Ok();
}

Status Rollback(const Common& c, const RollbackOptions& o) {
  const std::string body = o.revision ? nlohmann::json{{"revision", o.revision}}.dump() : "{}";
  HANGAR_ASSIGN_OR_RETURN(auto r, ApiClient(c.server).Post(Path(o.name, "/rollback"), body));
  if (c.output == "json") return PrintJson(r), Status::Ok();
  std::printf("service %s: rolling back as revision %d\n", o.name.c_str(), r.value("revision", 0));
  return Status::Ok();
}

Status Delete(const Common& c, const NameOptions& o) {
  HANGAR_ASSIGN_OR_RETURN(auto r, ApiClient(c.server).Delete(Path(o.name)));
  if (c.output == "json") return PrintJson(r), Status::Ok();
  std::printf("service %s: deleting (its replicas drain, then stop)\n", o.name.c_str());
  return Status::Ok();
}

Status LbConfig(const LbConfigOptions& o) {
  HANGAR_ASSIGN_OR_RETURN(auto layout, controller::service::ParseLbLayout(o.layout));
  std::printf("%s", controller::service::HaproxyConfig(layout).c_str());
  return Status::Ok();
}

}  // namespace

void RegisterServiceCommands(CLI::App& app, int* rc) {
  CLI::App* svc = app.add_subcommand(
      "service", "Services: replicas kept running behind one endpoint (docs/services.md)");
  svc->require_subcommand(1);
  {
    auto c = std::make_shared<Common>();
    auto o = std::make_shared<FileOptions>();
    CLI::App* cmd = svc->add_subcommand("create", "Create a service from a service file");
    cmd->add_option("-f,--file", o->file, "Service file (a job file with a service: block)")
        ->required();
    AddCommon(cmd, c.get());
    cmd->callback([=] { Guard(rc, [&] { return Create(*c, *o); }); });
  }
  {
    auto c = std::make_shared<Common>();
    auto o = std::make_shared<FileOptions>();
    CLI::App* cmd = svc->add_subcommand("update", "Roll out a new revision of a service");
    cmd->add_option("name", o->name, "The service")->required();
    cmd->add_option("-f,--file", o->file, "The service file's new version")->required();
    AddCommon(cmd, c.get());
    cmd->callback([=] { Guard(rc, [&] { return Update(*c, *o); }); });
  }
  {
    auto c = std::make_shared<Common>();
    CLI::App* cmd = svc->add_subcommand("list", "List services");
    AddCommon(cmd, c.get());
    cmd->callback([=] { Guard(rc, [&] { return List(*c); }); });
  }
  {
    auto c = std::make_shared<Common>();
    auto o = std::make_shared<NameOptions>();
    CLI::App* cmd = svc->add_subcommand("get", "Show a service: endpoint, replicas, revisions");
    cmd->add_option("name", o->name, "The service")->required();
    AddCommon(cmd, c.get());
    cmd->callback([=] { Guard(rc, [&] { return Get(*c, *o); }); });
  }
  {
    auto c = std::make_shared<Common>();
    auto o = std::make_shared<ScaleOptions>();
    CLI::App* cmd = svc->add_subcommand("scale", "Change how many replicas a service keeps");
    cmd->add_option("name", o->name, "The service")->required();
    cmd->add_option("--replicas", o->replicas, "The count")->required()->check(CLI::Range(0, 24));
    AddCommon(cmd, c.get());
    cmd->callback([=] { Guard(rc, [&] { return Scale(*c, *o); }); });
  }
  {
    auto c = std::make_shared<Common>();
    auto o = std::make_shared<RollbackOptions>();
    CLI::App* cmd =
        svc->add_subcommand("rollback", "Roll a service back to its last good revision");
    cmd->add_option("name", o->name, "The service")->required();
    cmd->add_option("--revision", o->revision, "This revision instead of the last good one");
    AddCommon(cmd, c.get());
    cmd->callback([=] { Guard(rc, [&] { return Rollback(*c, *o); }); });
  }
  {
    auto c = std::make_shared<Common>();
    auto o = std::make_shared<NameOptions>();
    CLI::App* cmd =
        svc->add_subcommand("delete", "Delete a service (its replicas drain, then stop)");
    cmd->add_option("name", o->name, "The service")->required();
    AddCommon(cmd, c.get());
    cmd->callback([=] { Guard(rc, [&] { return Delete(*c, *o); }); });
  }
  {
    auto o = std::make_shared<LbConfigOptions>();
    CLI::App* cmd =
        svc->add_subcommand("lb-config", "Print the haproxy.cfg for a controller's --service-lb");
    cmd->add_option("layout", o->layout, "ADMIN@HOST:FIRST_PORT+SLOTS, as given to --service-lb")
        ->required();
    cmd->callback([=] { Guard(rc, [&] { return LbConfig(*o); }); });
  }
}

}  // namespace hangar::cli
