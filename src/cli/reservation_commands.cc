// `hangar reservation create|list|delete` (docs/reservations.md): reservations and maintenance
// windows, a thin client of /v1/reservations.
#include "cli/cli_commands.h"
#include "cli/cli_common.h"
#include "cli/client.h"
#include "cli/table.h"

namespace hangar::cli {
namespace {

struct CreateOptions {
  Common common;
  std::string name, nodes, start, end, duration, selector;
  int count = 0;
  std::vector<std::string> users, queues;
  bool maintenance = false;
};

std::string Joined(const nlohmann::json& list) {
  std::string out;
  for (const auto& v : list) out += (out.empty() ? "" : ",") + v.get<std::string>();
  return out.empty() ? "-" : out;
}

std::string Who(const nlohmann::json& r) {
  if (r.value("maintenance", false)) return "maintenance";
  std::string out;
  if (!r.value("users", nlohmann::json::array()).empty()) out += "users " + Joined(r["users"]);
  if (!r.value("queues", nlohmann::json::array()).empty()) {
    out += (out.empty() ? "" : "; ") + std::string("queues ") + Joined(r["queues"]);
  }
  return out;
}

void PrintTable(const nlohmann::json& list) {
  Table t({"NAME", "STATE", "START", "END", "NODES", "FOR"});
  for (const auto& r : list) {
    t.Add({r.value("name", ""), r.value("state", ""), r.value("start", ""), r.value("end", ""),
           Joined(r.value("nodes", nlohmann::json::array())), Who(r)});
  }
  std::printf("%s", t.Render().c_str());
}

Status Create(const CreateOptions& o) {
  if (o.end.empty() == o.duration.empty()) {
    return Status::InvalidArgument("give the window's --end or its --duration (one of them)");
  }
  if (o.nodes.empty() == (o.count == 0)) {
    return Status::InvalidArgument(
        "give the reservation's --nodes, or --count N (with --selector SWITCH) to pick N nodes "
        "under one leaf switch");
  }
  nlohmann::json body = {{"name", o.name},
                         {"start", o.start},
                         {"users", o.users},
                         {"queues", o.queues},
                         {"maintenance", o.maintenance}};
  if (!o.nodes.empty()) body["nodes"] = o.nodes;
  if (o.count > 0) body["count"] = o.count;
  if (!o.selector.empty()) body["selector"] = o.selector;
  if (!o.end.empty()) body["end"] = o.end;
  if (!o.duration.empty()) body["duration"] = o.duration;
  HANGAR_ASSIGN_OR_RETURN(auto r, ApiClient(o.common.server).Post("/v1/reservations", body.dump()));
  if (o.common.output == "json") {
    PrintJson(r);
    return Status::Ok();
  }
  std::printf("%s %s booked: %s from %s to %s\n",
              r.value("maintenance", false) ? "maintenance window" : "reservation",
              r.value("name", "").c_str(),
              Joined(r.value("nodes", nlohmann::json::array())).c_str(),
              r.value("start", "").c_str(), r.value("end", "").c_str());
  return Status::Ok();
}

Status List(const Common& c) {
  HANGAR_ASSIGN_OR_RETURN(auto r, ApiClient(c.server).Get("/v1/reservations"));
  if (c.output == "json") {
    PrintJson(r);
    return Status::Ok();
  }
  PrintTable(r.value("reservations", nlohmann::json::array()));
  return Status::Ok();
}

Status Delete(const Common& c, const std::string& name) {
  HANGAR_ASSIGN_OR_RETURN(auto r, ApiClient(c.server).Delete("/v1/reservations/" + name));
  if (c.output == "json") {
    PrintJson(r);
    return Status::Ok();
  }
  std::printf("reservation %s deleted\n", name.c_str());
  return Status::Ok();
}

}  // namespace

void RegisterReservationCommands(CLI::App& app, int* rc) {
  CLI::App* res = app.add_subcommand("reservation",
                                     "Reservations and maintenance windows (docs/reservations.md)");
  res->require_subcommand(1);

  auto o = std::make_shared<CreateOptions>();
  CLI::App* create = res->add_subcommand(
      "create", "Hold nodes over a window for some users or queues, or for maintenance");
  create->add_option("--name", o->name, "Its name; jobs name it with `reservation: NAME`")
      ->required();
  create->add_option("--nodes", o->nodes, "Its nodes: node-1,node-2 or node-[1-8] (or --count)");
  create->add_option("--count", o->count,
                     "Pick this many nodes under one leaf switch, free over the window (instead "
                     "of --nodes)");
  create->add_option("--selector", o->selector,
                     "With --count: the leaf or spine switch to pick them in (default: all)");
  create->add_option("--start", o->start, "When the window opens, in UTC: 2027-01-04T10:00:00Z")
      ->required();
  create->add_option("--end", o->end, "When it closes, in UTC (or --duration)");
  create->add_option("--duration", o->duration, "How long it lasts: 30m, 4h, 2d (or --end)");
  create->add_option("--users", o->users, "Users whose jobs may run inside it")->delimiter(',');
  create->add_option("--queues", o->queues, "Queues whose jobs may run inside it")->delimiter(',');
  create->add_flag("--maintenance", o->maintenance,
                   "A maintenance window: jobs on its nodes are checkpointed before it, the nodes "
                   "drain at its start "
                   "and are validated after its end");
  AddCommon(create, &o->common);
  create->callback([=] { Guard(rc, [&] { return Create(*o); }); });

  auto lc = std::make_shared<Common>();
  CLI::App* list =
      res->add_subcommand("list", "Reservations and maintenance windows, booked and open");
  AddCommon(list, lc.get());
  list->callback([=] { Guard(rc, [&] { return List(*lc); }); });

  auto dc = std::make_shared<Common>();
  auto name = std::make_shared<std::string>();
  CLI::App* del = res->add_subcommand(
      "delete", "End a reservation now (a maintenance window's nodes are validated)");
  del->add_option("name", *name, "The reservation")->required();
  AddCommon(del, dc.get());
  del->callback([=] { Guard(rc, [&] { return Delete(*dc, *name); }); });
}

}  // namespace hangar::cli
