// `hangar maintain` (docs/maintenance.md): rolling maintenance, a thin client of /v1/maintenance.
//   hangar maintain --nodes SELECTOR --batch N --run 'COMMAND' [--timeout 1h]
//                   [--return-timeout 30m] [--wait]
//   hangar maintain status [ID] [--show-output]
//   hangar maintain list
//   hangar maintain cancel ID
#include <chrono>
#include <thread>

#include "cli/cli_commands.h"
#include "cli/cli_common.h"
#include "cli/client.h"
#include "cli/table.h"
#include "common/time.h"

namespace hangar::cli {
namespace {

struct StartOptions {
  Common common;
  std::string nodes, run, timeout, return_timeout;
  int batch = 0;
  bool wait = false;
};

struct StatusOptions {
  Common common;
  std::string id = "latest";
  bool show_output = false;
};

bool Over(const nlohmann::json& r) {
  const std::string s = r.value("state", "");
  return s == "succeeded" || s == "failed" || s == "cancelled";
}

std::string Note(const nlohmann::json& n) {
  const std::string step = n.value("step", "");
  if (step == "failed" || step == "skipped") return n.value("error", "");
  if (step == "draining") return "waiting for its jobs to checkpoint and stop";
  if (step == "running") return "its command runs";
  if (step == "validating") return "validating before it takes work";
  return "";
}

void PrintRun(const nlohmann::json& r, bool show_output) {
  std::printf("maintenance run %s: %s", r["id"].dump().c_str(), r.value("state", "").c_str());
  if (!r.value("failure", "").empty()) std::printf(" (%s)", r.value("failure", "").c_str());
  std::printf("\ncommand: %s\nnodes: %s, %d at a time; batch %d of %d; started %s by %s\n",
              r.value("command", "").c_str(), r.value("nodes_selector", "").c_str(),
              r.value("batch_size", 0), r.value("batch", 0), r.value("batches", 0),
              r.value("created", "").c_str(), r.value("created_by", "").c_str());
  Table t({"NODE", "BATCH", "STEP", "EXIT", "TOOK", "NOTE"});
  for (const auto& n : r.value("nodes", nlohmann::json::array())) {
    const std::string step = n.value("step", "");
    const bool ran = step == "validating" || step == "done" || step == "failed";
    const bool outcome = ran && n.value("error", "").find("not run") == std::string::npos;
    t.Add({n.value("node", ""), std::to_string(n.value("batch", 0)), step,
           outcome ? std::to_string(n.value("exit_code", 0)) : "-",
           outcome ? FormatDuration(n.value("took_ms", Duration{0})) : "-", Note(n)});
  }
  std::printf("%s", t.Render().c_str());
  for (const auto& n : r.value("nodes", nlohmann::json::array())) {
    if (!show_output && n.value("step", "") != "failed") continue;
    if (n.value("output", "").empty()) continue;
    std::printf("--- output of %s ---\n%s", n.value("node", "").c_str(),
                n.value("output", "").c_str());
    if (n.value("output", "").back() != '\n') std::printf("\n");
  }
}

Status Show(const Common& c, const std::string& id, bool show_output, nlohmann::json* out) {
  HANGAR_ASSIGN_OR_RETURN(auto r, ApiClient(c.server).Get("/v1/maintenance/" + id));
  if (c.output == "json") {
    PrintJson(r);
  } else {
    PrintRun(r, show_output);
  }
  if (out) *out = r;
  return Status::Ok();
}

Status Start(const StartOptions& o) {
  nlohmann::json body = {{"nodes", o.nodes}, {"batch", o.batch}, {"run", o.run}};
  if (!o.timeout.empty()) body["timeout"] = o.timeout;
  if (!o.return_timeout.empty()) body["return_timeout"] = o.return_timeout;
  HANGAR_ASSIGN_OR_RETURN(auto r, ApiClient(o.common.server).Post("/v1/maintenance", body.dump()));
  const std::string id = r["id"].dump();
  if (!o.wait) {
    if (o.common.output == "json") {
      PrintJson(r);
    } else {
      std::printf(
          "maintenance run %s started: %zu node(s) in %d batch(es) of at most %d; follow it with "
          "`hangar maintain status %s`\n",
          id.c_str(), r.value("nodes", nlohmann::json::array()).size(), r.value("batches", 0),
          o.batch, id.c_str());
    }
    return Status::Ok();
  }
  for (;;) {
    HANGAR_ASSIGN_OR_RETURN(r, ApiClient(o.common.server).Get("/v1/maintenance/" + id));
    if (Over(r)) break;
    std::this_thread::sleep_for(std::chrono::seconds(1));
  }
  HANGAR_RETURN_IF_ERROR(Show(o.common, id, false, nullptr));
  if (r.value("state", "") != "succeeded")
    return Status::Aborted("maintenance run " + id + " " + r.value("state", "") + ": " +
                           r.value("failure", ""));
  return Status::Ok();
}

Status List(const Common& c) {
  HANGAR_ASSIGN_OR_RETURN(auto r, ApiClient(c.server).Get("/v1/maintenance"));
  if (c.output == "json") {
    PrintJson(r);
    return Status::Ok();
  }
  Table t({"ID", "STATE", "NODES", "BATCH", "STARTED", "BY", "COMMAND"});
  for (const auto& run : r.value("runs", nlohmann::json::array())) {
    t.Add({run["id"].dump(), run.value("state", ""), run.value("nodes_selector", ""),
           std::to_string(run.value("batch", 0)) + "/" + std::to_string(run.value("batches", 0)),
           run.value("created", ""), run.value("created_by", ""), run.value("command", "")});
  }
  std::printf("%s", t.Render().c_str());
  return Status::Ok();
}

Status Cancel(const Common& c, const std::string& id) {
  HANGAR_ASSIGN_OR_RETURN(auto r,
                          ApiClient(c.server).Post("/v1/maintenance/" + id + "/cancel", "{}"));
  if (c.output == "json") {
    PrintJson(r);
    return Status::Ok();
  }
  std::printf("maintenance run %s cancelled: its nodes stay as they are\n", id.c_str());
  return Status::Ok();
}

}  // namespace

void RegisterMaintainCommands(CLI::App& app, int* rc) {
  auto o = std::make_shared<StartOptions>();
  CLI::App* m = app.add_subcommand(
      "maintain",
      "Rolling maintenance: N nodes at a time drained, the command run on each by its agent, "
      "validated and returned (docs/maintenance.md)");
  m->require_subcommand(0, 1);
  m->add_option("--nodes", o->nodes, "The nodes: node-[1-16], a leaf or spine switch, or all");
  m->add_option("--batch", o->batch, "How many nodes are out of service at once");
  m->add_option("--run", o->run,
                "The command each node's agent runs (/bin/sh -c, as the agent's user; agents "
                "need --allow-maintenance-commands)");
  m->add_option("--timeout", o->timeout, "How long the command may run on a node (default 1h)");
  m->add_option("--return-timeout", o->return_timeout,
                "How long a node may then take to answer and to come back validated and ready "
                "before it fails the run (default 30m)");
  m->add_flag("--wait", o->wait, "Wait until the run is over; exit 1 unless it succeeded");
  AddCommon(m, &o->common);

  auto so = std::make_shared<StatusOptions>();
  CLI::App* status = m->add_subcommand("status", "A run's progress, node by node");
  status->add_option("id", so->id, "The run (default: the latest)");
  status->add_flag("--show-output", so->show_output,
                   "Every node's command output (a failed node's is always shown)");
  AddCommon(status, &so->common);
  status->callback(
      [=] { Guard(rc, [&] { return Show(so->common, so->id, so->show_output, nullptr); }); });

  auto lc = std::make_shared<Common>();
  CLI::App* list = m->add_subcommand("list", "The maintenance runs kept, newest first");
  AddCommon(list, lc.get());
  list->callback([=] { Guard(rc, [&] { return List(*lc); }); });

  auto cc = std::make_shared<Common>();
  auto id = std::make_shared<std::string>();
  CLI::App* cancel =
      m->add_subcommand("cancel", "Stop a run where it is (the nodes it drained stay drained)");
  cancel->add_option("id", *id, "The run")->required();
  AddCommon(cancel, cc.get());
  cancel->callback([=] { Guard(rc, [&] { return Cancel(*cc, *id); }); });

  m->callback([=] {
    if (!m->get_subcommands().empty()) return;
    Guard(rc, [&] {
      if (o->nodes.empty() || o->run.empty() || o->batch < 1) {
        return Status::InvalidArgument(
            "say which nodes, how many at a time and what to run: hangar maintain --nodes "
            "'node-[1-16]' --batch 4 --run '/opt/fw/update.sh' (or `hangar maintain status`)");
      }
      return Start(*o);
    });
  });
}

}  // namespace hangar::cli
