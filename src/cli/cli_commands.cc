#include "cli/cli_commands.h"

#include <cstdio>
#include <fstream>
#include <iostream>
#include <sstream>

#include "api/views.h"
#include "cli/cli_common.h"
#include "cli/client.h"
#include "cli/table.h"
#include "common/time.h"
#include "common/units.h"
#include "job/job_spec.h"

namespace hangar::cli {
namespace {


std::string Gpus(double g) {
  char buf[32];
  std::snprintf(buf, sizeof buf, g == static_cast<int>(g) ? "%.0f" : "%.2f", g);
  return buf;
}

std::string Short(const std::string& s, size_t n) { return s.size() <= n ? s : s.substr(0, n - 1) + "~"; }

Status Submit(const Common& c, const std::string& file) {
  std::ifstream in(file);
  if (!in) return Status::NotFound(file + ": cannot open the job file; check the path");
  std::stringstream ss;
  ss << in.rdbuf();
  // Validate locally first: the same parser, with the file's own name in the message.
  auto spec = job::ParseJobSpec(ss.str(), file);
  if (!spec.ok()) return spec.status();
  HANGAR_ASSIGN_OR_RETURN(auto r, ApiClient(c.server).Post("/v1/jobs", ss.str(), "application/yaml"));
  if (c.output == "json") PrintJson(r);
  else std::printf("submitted job %llu (%s)\n", r["id"].get<unsigned long long>(), spec->name.c_str());
  return Status::Ok();
}

Status Jobs(const Common& c, const std::string& state) {
  HANGAR_ASSIGN_OR_RETURN(auto r, ApiClient(c.server).Get("/v1/jobs" + (state.empty() ? "" : "?state=" + state)));
  if (c.output == "json") return PrintJson(r), Status::Ok();
  Table t({"ID", "NAME", "QUEUE", "STATE", "GPUS", "TASKS", "AGE", "REASON"});
  const Time now = SystemClock::Default()->Now();
  for (const auto& j : r["jobs"]) {
    HANGAR_ASSIGN_OR_RETURN(api::JobView v, api::JobViewFromJson(j));
    t.Add({std::to_string(v.id), Short(v.name, 24), v.queue, v.state, Gpus(v.gpus), std::to_string(v.tasks),
           Ago(v.submitted, now), Short(v.reason, 70)});
  }
  std::printf("%s", t.Render().c_str());
  return Status::Ok();
}

Status ShowJob(const Common& c, const std::string& id) {
  HANGAR_ASSIGN_OR_RETURN(auto r, ApiClient(c.server).Get("/v1/jobs/" + id));
  if (c.output == "json") return PrintJson(r), Status::Ok();
  HANGAR_ASSIGN_OR_RETURN(api::JobView v, api::JobViewFromJson(r));
  std::printf("job %llu  %s\n  state:    %s (attempt %u, %u restarts)\n  queue:    %s  tier %s  priority %d\n"
              "  user:     %s\n  gpus:     %s in %d tasks\n  submitted %s\n",
              static_cast<unsigned long long>(v.id), v.name.c_str(), v.state.c_str(), v.attempt, v.restarts,
              v.queue.c_str(), v.tier.c_str(), v.priority, v.user.c_str(), Gpus(v.gpus).c_str(), v.tasks,
              FormatUtcTimestamp(v.submitted).c_str());
  if (v.started) std::printf("  started   %s\n", FormatUtcTimestamp(v.started).c_str());
  if (v.ended) std::printf("  ended     %s\n", FormatUtcTimestamp(v.ended).c_str());
  if (!v.reason.empty()) std::printf("  reason:   %s\n", v.reason.c_str());
  if (!v.task_views.empty()) {
    Table t({"  TASK", "GROUP", "NODE", "GPUS", "STATE", "EXIT"});
    for (const auto& tv : v.task_views) {
      std::string gpus;
      for (uint32_t g : tv.gpus) gpus += (gpus.empty() ? "" : ",") + std::to_string(g);
      t.Add({"  " + std::to_string(tv.index), tv.group, tv.node, gpus.empty() ? "-" : gpus, tv.state,
             tv.state == "ended" ? (tv.signal ? "signal " + std::to_string(tv.signal) : std::to_string(tv.exit_code)) : "-"});
    }
    std::printf("%s", t.Render().c_str());
  }
  return Status::Ok();
}

Status Cancel(const Common& c, const std::string& id) {
  HANGAR_ASSIGN_OR_RETURN(auto r, ApiClient(c.server).Post("/v1/jobs/" + id + "/cancel", ""));
  if (c.output == "json") PrintJson(r);
  else std::printf("job %s cancelled\n", id.c_str());
  return Status::Ok();
}

Status Explain(const Common& c, const std::string& id) {
  HANGAR_ASSIGN_OR_RETURN(auto r, ApiClient(c.server).Get("/v1/jobs/" + id + "/explain"));
  if (c.output == "json") return PrintJson(r), Status::Ok();
  std::printf("job %s (%s) is %s", id.c_str(), r.value("name", "").c_str(), r.value("state", "").c_str());
  const std::string reason = r.value("reason", ""), rule = r.value("rule", "");
  if (!reason.empty()) std::printf(": %s", reason.c_str());
  if (!rule.empty() && rule != "none") std::printf("  [rule: %s]", rule.c_str());
  std::printf("\n");
  return Status::Ok();
}

Status Logs(const Common& c, const std::string& id, int task, bool follow, bool err) {
  std::string path = "/v1/jobs/" + id + "/logs?task=" + std::to_string(task) + (follow ? "&follow=1" : "") +
                     (err ? "&stream=stderr" : "");
  return ApiClient(c.server).Stream(path, [](const char* d, size_t n) {
    std::fwrite(d, 1, n, stdout);
    std::fflush(stdout);
    return true;
  });
}

Status Nodes(const Common& c) {
  HANGAR_ASSIGN_OR_RETURN(auto r, ApiClient(c.server).Get("/v1/nodes"));
  if (c.output == "json") return PrintJson(r), Status::Ok();
  Table t({"NAME", "STATE", "LEAF", "MODEL", "GPUS", "FREE", "CPU FREE", "MEM FREE", "JOBS", "REASON"});
  for (const auto& j : r["nodes"]) {
    HANGAR_ASSIGN_OR_RETURN(api::NodeView v, api::NodeViewFromJson(j));
    std::string reason = v.reason;
    for (const auto& cond : v.conditions) reason += (reason.empty() ? "" : "; ") + cond;
    t.Add({v.name, v.state, v.leaf, v.model, std::to_string(v.gpus), Gpus(v.gpus_free), FormatMilli(v.milli_cpu_free),
           FormatMemoryMiB(v.memory_mib_free), std::to_string(v.jobs.size()), Short(reason, 60)});
  }
  std::printf("%s", t.Render().c_str());
  return Status::Ok();
}

Status ShowNode(const Common& c, const std::string& name) {
  HANGAR_ASSIGN_OR_RETURN(auto r, ApiClient(c.server).Get("/v1/nodes/" + name));
  if (c.output == "json") return PrintJson(r), Status::Ok();
  HANGAR_ASSIGN_OR_RETURN(api::NodeView v, api::NodeViewFromJson(r));
  std::printf("node %s  %s%s\n  fabric: leaf %s, spine %s\n  gpus:   %d x %s, %s free\n  address: %s\n",
              v.name.c_str(), v.state.c_str(), v.reason.empty() ? "" : (" (" + v.reason + ")").c_str(), v.leaf.c_str(),
              v.spine.c_str(), v.gpus, v.model.c_str(), Gpus(v.gpus_free).c_str(), v.address.c_str());
  for (const auto& cond : v.conditions) std::printf("  condition: %s\n", cond.c_str());
  if (r.contains("events")) {
    std::printf("  history:\n");
    for (const auto& e : r["events"]) {
      std::printf("    %s  %s\n", FormatUtcTimestamp(e.value("time_ms", int64_t{0})).c_str(), e.value("message", "").c_str());
    }
  }
  return Status::Ok();
}

Status Drain(const Common& c, const std::string& node, const std::string& reason, bool on) {
  HANGAR_ASSIGN_OR_RETURN(auto r, ApiClient(c.server).Post("/v1/nodes/" + node + (on ? "/drain" : "/undrain"),
                                                        nlohmann::json{{"reason", reason}}.dump()));
  if (c.output == "json") PrintJson(r);
  else std::printf("node %s %s\n", node.c_str(), on ? "drained: no new work will be placed on it" : "undrained");
  return Status::Ok();
}

Status Remediate(const Common& c, const std::string& node, const std::string& remedy, int gpu, const std::string& note) {
  nlohmann::json body = {{"remedy", remedy}, {"note", note}};
  if (gpu >= 0) body["gpu"] = gpu;
  HANGAR_ASSIGN_OR_RETURN(auto r, ApiClient(c.server).Post("/v1/nodes/" + node + "/remediate", body.dump()));
  if (c.output == "json") PrintJson(r);
  else std::printf("node %s: %s recorded; it takes work again once it passes validation\n", node.c_str(), remedy.c_str());
  return Status::Ok();
}

Status ResetSafetyValve(const Common& c) {
  HANGAR_ASSIGN_OR_RETURN(auto r, ApiClient(c.server).Post("/v1/health/safety-valve/reset", "{}"));
  if (c.output == "json") PrintJson(r);
  else std::printf("safety valve reset: health rules may drain nodes again\n");
  return Status::Ok();
}

Status Events(const Common& c, const std::string& subject, int limit) {
  HANGAR_ASSIGN_OR_RETURN(auto r, ApiClient(c.server).Get("/v1/events?limit=" + std::to_string(limit) +
                                                       (subject.empty() ? "" : "&subject=" + subject)));
  if (c.output == "json") return PrintJson(r), Status::Ok();
  Table t({"TIME", "SUBJECT", "EVENT"});
  for (const auto& e : r["events"]) {
    t.Add({FormatUtcTimestamp(e.value("time_ms", int64_t{0})), e.value("subject", ""), e.value("message", "")});
  }
  std::printf("%s", t.Render().c_str());
  return Status::Ok();
}

}  // namespace

void RegisterUserCommands(CLI::App& app, int* rc) {
  auto c = std::make_shared<Common>();
  auto s = std::make_shared<std::vector<std::string>>(4);
  auto num = std::make_shared<int>(0);
  auto flag = std::make_shared<std::pair<bool, bool>>(false, false);

  CLI::App* submit = app.add_subcommand("submit", "Submit a job file (docs/job-format.md)");
  submit->add_option("file", (*s)[0], "Job file (YAML)")->required();
  AddCommon(submit, c.get());
  submit->callback([=] { Guard(rc, [&] { return Submit(*c, (*s)[0]); }); });

  CLI::App* jobs = app.add_subcommand("jobs", "List jobs, newest first");
  jobs->add_option("--state", (*s)[0], "Only jobs in this state");
  AddCommon(jobs, c.get());
  jobs->callback([=] { Guard(rc, [&] { return Jobs(*c, (*s)[0]); }); });

  CLI::App* job = app.add_subcommand("job", "Show one job, its tasks and where they run");
  job->add_option("id", (*s)[0], "Job id")->required();
  AddCommon(job, c.get());
  job->callback([=] { Guard(rc, [&] { return ShowJob(*c, (*s)[0]); }); });

  CLI::App* cancel = app.add_subcommand("cancel", "Cancel a job: stop every task");
  cancel->add_option("id", (*s)[0], "Job id")->required();
  AddCommon(cancel, c.get());
  cancel->callback([=] { Guard(rc, [&] { return Cancel(*c, (*s)[0]); }); });

  CLI::App* explain = app.add_subcommand("explain", "Why a job waits (or how it ended)");
  explain->add_option("id", (*s)[0], "Job id")->required();
  AddCommon(explain, c.get());
  explain->callback([=] { Guard(rc, [&] { return Explain(*c, (*s)[0]); }); });

  CLI::App* logs = app.add_subcommand("logs", "Print a task's output");
  logs->add_option("id", (*s)[0], "Job id")->required();
  logs->add_option("--task", *num, "Task index")->capture_default_str();
  logs->add_flag("-f,--follow", flag->first, "Keep printing until the task ends");
  logs->add_flag("--stderr", flag->second, "Standard error instead of standard output");
  AddCommon(logs, c.get());
  logs->callback([=] { Guard(rc, [&] { return Logs(*c, (*s)[0], *num, flag->first, flag->second); }); });

  CLI::App* nodes = app.add_subcommand("nodes", "List nodes, their state and free capacity");
  AddCommon(nodes, c.get());
  nodes->callback([=] { Guard(rc, [&] { return Nodes(*c); }); });

  CLI::App* node = app.add_subcommand("node", "Show one node and its history");
  node->add_option("name", (*s)[0], "Node name")->required();
  AddCommon(node, c.get());
  node->callback([=] { Guard(rc, [&] { return ShowNode(*c, (*s)[0]); }); });

  CLI::App* drain = app.add_subcommand("drain", "Place no new work on a node");
  drain->add_option("node", (*s)[0], "Node name")->required();
  drain->add_option("--reason", (*s)[1], "Why (kept with the node)")->required();
  AddCommon(drain, c.get());
  drain->callback([=] { Guard(rc, [&] { return Drain(*c, (*s)[0], (*s)[1], true); }); });

  CLI::App* undrain = app.add_subcommand("undrain", "Let a drained node take work again");
  undrain->add_option("node", (*s)[0], "Node name")->required();
  AddCommon(undrain, c.get());
  undrain->callback([=] { Guard(rc, [&] { return Drain(*c, (*s)[0], "", false); }); });

  auto gpu = std::make_shared<int>(-1);
  CLI::App* remediate = app.add_subcommand("remediate", "Record a GPU reset, node reboot or repair; validation follows");
  remediate->add_option("node", (*s)[0], "Node name")->required();
  remediate->add_option("--remedy", (*s)[1], "gpu-reset, reboot or repair")
      ->required()
      ->check(CLI::IsMember({"gpu-reset", "reboot", "repair"}));
  remediate->add_option("--gpu", *gpu, "The GPU index (gpu-reset; repair of one GPU)");
  remediate->add_option("--note", (*s)[2], "What was done, kept in the node's history");
  AddCommon(remediate, c.get());
  remediate->callback([=] { Guard(rc, [&] { return Remediate(*c, (*s)[0], (*s)[1], *gpu, (*s)[2]); }); });

  CLI::App* valve = app.add_subcommand("reset-safety-valve", "Let health rules drain nodes again after the valve tripped");
  AddCommon(valve, c.get());
  valve->callback([=] { Guard(rc, [&] { return ResetSafetyValve(*c); }); });

  CLI::App* events = app.add_subcommand("events", "What happened, newest first");
  events->add_option("--subject", (*s)[0], "Only events of e.g. node/gpu-1 or job/42");
  events->add_option("--limit", *num, "How many")->default_val(50);
  AddCommon(events, c.get());
  events->callback([=] { Guard(rc, [&] { return Events(*c, (*s)[0], *num); }); });
}

}  // namespace hangar::cli
