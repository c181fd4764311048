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
#include "controller/service/service_explain.h"

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
  std::string tls_dir;          // the cluster's certificates (`hangar certs`): DIR/controller.crt
  std::string tls_cert;         // or this certificate
  std::string client_ca;        // require client certificates signed by this CA
  bool verify_clients = false;  // with --tls-dir: by DIR/ca.crt
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

// A file HAProxy will read, as an absolute path (HAProxy runs from another folder), checked to be
// there now so that a typo is caught before HAProxy refuses to start.
StatusOr<std::string> TlsFile(const std::string& path, const char* what) {
  std::error_code ec;
  const std::string abs = std::filesystem::absolute(path, ec).lexically_normal().string();
  if (ec || !std::filesystem::is_regular_file(abs, ec)) {
    return Status::NotFound(std::string(what) + " " + path +
                            " is not a file; issue the cluster's with `hangar certs issue "
                            "--controller --host NAME` (NAME: the endpoints' address)");
  }
  if (abs.find('"') != std::string::npos)
    return Status::InvalidArgument(std::string(what) + " " + path + ": a path with '\"' in it");
  return abs;
}

// The endpoints' TLS from the flags: --tls-dir DIR (DIR/controller.crt, its key DIR/controller.key
// beside it; --verify-clients: DIR/ca.crt), or --tls-cert and --client-ca.
StatusOr<controller::service::EndpointTls> EndpointTlsOf(const LbConfigOptions& o) {
  controller::service::EndpointTls tls;
  std::string cert = o.tls_cert, ca = o.client_ca;
  if (!o.tls_dir.empty()) {
    if (cert.empty()) cert = o.tls_dir + "/controller.crt";
    if (ca.empty() && o.verify_clients) ca = o.tls_dir + "/ca.crt";
  }
  if (cert.empty() && (!ca.empty() || o.verify_clients)) {
    return Status::InvalidArgument(
        "client certificates need TLS at the endpoints: give --tls-dir DIR or --tls-cert FILE");
  }
  if (cert.empty()) return tls;
  HANGAR_ASSIGN_OR_RETURN(tls.cert, TlsFile(cert, "the certificate"));
  std::filesystem::path key = tls.cert;
  key.replace_extension(".key");
  std::ifstream in(tls.cert);
  std::stringstream pem;
  pem << in.rdbuf();
  if (pem.str().find("PRIVATE KEY-----") == std::string::npos && !std::filesystem::exists(key)) {
    return Status::NotFound("the certificate " + cert + " holds no key, and " + key.string() +
                            " is not there; HAProxy needs the key in the same file or beside it");
  }
  if (!ca.empty()) {
    HANGAR_ASSIGN_OR_RETURN(tls.client_ca, TlsFile(ca, "the client CA"));
  }
  return tls;
}

Status LbConfig(const LbConfigOptions& o) {
  HANGAR_ASSIGN_OR_RETURN(auto layout, controller::service::ParseLbLayout(o.layout));
  HANGAR_ASSIGN_OR_RETURN(auto tls, EndpointTlsOf(o));
  std::printf("%s", controller::service::HaproxyConfig(layout, tls).c_str());
  return Status::Ok();
}

}  // namespace

Status ExplainService(const Common& c, const std::string& name) {
  HANGAR_ASSIGN_OR_RETURN(auto r, ApiClient(c.server).Get(Path(name, "/explain")));
  if (c.output == "json") return PrintJson(r), Status::Ok();
  std::printf("%s", controller::service::ExplainText(r).c_str());
  return Status::Ok();
}

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
    auto* count = cmd->add_option("count", o->replicas, "The count (or --replicas N)")
                      ->check(CLI::Range(0, 24));
    cmd->add_option("--replicas", o->replicas, "The count")
        ->check(CLI::Range(0, 24))
        ->excludes(count);
    AddCommon(cmd, c.get());
    cmd->callback([=] {
      Guard(rc, [&] {
        if (o->replicas < 0) {
          return Status::InvalidArgument("give the count: hangar service scale " + o->name +
                                         " N (or --replicas N), N from 0 to 24");
        }
        return Scale(*c, *o);
      });
    });
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
    cmd->add_option(
        "--tls-dir", o->tls_dir,
        "Serve the endpoints over TLS with the cluster's certificate, DIR/controller.crt "
        "and .key (`hangar certs`)");
    cmd->add_option("--tls-cert", o->tls_cert,
                    "Serve the endpoints over TLS with this certificate (its key in it, or beside "
                    "it as NAME.key)");
    cmd->add_option("--client-ca", o->client_ca, "Require client certificates signed by this CA");
    cmd->add_flag("--verify-clients", o->verify_clients,
                  "With --tls-dir: require client certificates signed by DIR/ca.crt");
    cmd->callback([=] { Guard(rc, [&] { return LbConfig(*o); }); });
  }
}

}  // namespace hangar::cli
