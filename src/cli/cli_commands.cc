#include "cli/cli_commands.h"

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <thread>

#include "api/views.h"
#include "cli/batch_commands.h"
#include "cli/cli_common.h"
#include "cli/client.h"
#include "cli/service_commands.h"
#include "cli/table.h"
#include "common/time.h"
#include "common/units.h"
#include "job/job_spec.h"

namespace hangar::cli {

Status CheckJobId(const std::string& id) {
  const bool digits =
      !id.empty() && id.size() <= 19 &&
      std::all_of(id.begin(), id.end(), [](unsigned char ch) { return std::isdigit(ch); });
  if (digits) return Status::Ok();
  return Status::InvalidArgument("job ids are numbers; '" + id +
                                 "' is not one - find the id with `hangar jobs`");
}

namespace {

constexpr std::chrono::milliseconds kLogsPollInterval{500};

// One options struct per command: nothing is shared between subcommands (a shared int once made
// `hangar logs` ask for task 50, the default of `events --limit`).
struct LogsOptions {
  std::string id;
  int task = 0;
  int attempt = -1;  // -1: the current one (or, while it waits, the latest that ran)
  bool follow = false;
  bool stderr_stream = false;
};

struct EventsOptions {
  std::string subject;
  int limit = 50;
};

struct RemediateOptions {
  std::string node;
  std::string remedy;
  int gpu = -1;
  std::string note;
};

struct DrainOptions {
  std::string node;
  std::string reason;
};

std::string Gpus(double g) {
  char buf[32];
  std::snprintf(buf, sizeof buf, g == static_cast<int>(g) ? "%.0f" : "%.2f", g);
  return buf;
}

std::string Short(const std::string& s, size_t n) {
  return s.size() <= n ? s : s.substr(0, n - 1) + "~";
}

struct SubmitOptions {
  std::string file;
  std::string array;  // overrides the file's array:
  std::string after;  // overrides the file's after: ("ok:12:13,any:14")
};

Status Submit(const Common& c, const SubmitOptions& o) {
  const std::string& file = o.file;
  std::ifstream in(file);
  if (!in) return Status::NotFound(file + ": cannot open the job file; check the path");
  std::stringstream ss;
  ss << in.rdbuf();
  // Validate locally first: the same parser, with the file's own name in the message.
  auto spec = job::ParseJobSpec(ss.str(), file);
  if (!spec.ok()) return spec.status();
  // A relative workdir is the job file's folder's: sent resolved (the spec as JSON), the text as is
  // otherwise.
  std::string body = ss.str(), type = "application/yaml";
  bool relative = false;
  for (const auto& t : spec->tasks)
    relative = relative || (!t.workdir.empty() && t.workdir.front() != '/');
  if (!o.array.empty()) {
    HANGAR_ASSIGN_OR_RETURN(spec->array, job::ParseArraySpec(o.array));
  }
  if (!o.after.empty()) {
    HANGAR_ASSIGN_OR_RETURN(spec->after, job::ParseDependencyFlag(o.after));
  }
  if (relative || !o.array.empty() || !o.after.empty()) {
    job::ResolveWorkdirs(&*spec, std::filesystem::path(file).parent_path().string());
    body = job::JobSpecToJson(*spec).dump();
    type = "application/json";
  }
  HANGAR_ASSIGN_OR_RETURN(
      auto r, ApiClient(c.server).PostOnce("/v1/jobs", body, type, NewIdempotencyKey()));
  if (c.output == "json") {
    PrintJson(r);
  } else if (r.contains("array_id")) {
    std::printf("submitted array %llu (%s): jobs %llu-%llu, %llu elements%s\n",
                r["array_id"].get<unsigned long long>(), spec->name.c_str(),
                r["first_id"].get<unsigned long long>(), r["last_id"].get<unsigned long long>(),
                r["count"].get<unsigned long long>(),
                spec->array.max_running
                    ? (", at most " + std::to_string(spec->array.max_running) + " running").c_str()
                    : "");
  } else {
    std::printf("submitted job %llu (%s)\n", r["id"].get<unsigned long long>(), spec->name.c_str());
  }
  if (c.output != "json" && r.contains("warning") && r["warning"].is_string()) {
    std::fprintf(stderr, "warning: %s\n", r["warning"].get<std::string>().c_str());
  }
  return Status::Ok();
}

// The progress lines of `hangar job` and `hangar explain` (docs/progress.md): each rank's last
// step and when it came, stragglers, and the last hang.
void PrintProgress(const nlohmann::json& p) {
  if (!p.is_object()) return;
  if (p.contains("last_hang") && p["last_hang"].is_string()) {
    std::printf("  last hang (attempt %d): %s\n", p.value("last_hang_attempt", 0),
                p["last_hang"].get<std::string>().c_str());
  }
  const auto& ranks = p.value("ranks", nlohmann::json::array());
  if (ranks.empty()) return;
  std::printf("  progress (attempt %d):\n", p.value("attempt", 0));
  Table t({"  RANK", "NODE", "STEP", "REPORTED", "STEP TIME", "STRAGGLER"});
  for (const auto& r : ranks) {
    char step_time[32] = "-";
    if (r.contains("step_time_s"))
      std::snprintf(step_time, sizeof step_time, "%.3f s", r["step_time_s"].get<double>());
    t.Add({"  " + std::to_string(r.value("rank", 0)), r.value("node", ""),
           std::to_string(r.value("step", uint64_t{0})),
           FormatUtcTimestamp(r.value("at_ms", int64_t{0})), step_time,
           r.value("straggler", false) ? "yes" : "-"});
  }
  std::printf("%s", t.Render().c_str());
}

Status ShowJob(const Common& c, const std::string& id) {
  HANGAR_RETURN_IF_ERROR(CheckJobId(id));
  HANGAR_ASSIGN_OR_RETURN(auto r, ApiClient(c.server).Get("/v1/jobs/" + id));
  if (c.output == "json") return PrintJson(r), Status::Ok();
  HANGAR_ASSIGN_OR_RETURN(api::JobView v, api::JobViewFromJson(r));
  std::printf(
      "job %llu  %s\n  state:    %s (attempt %u, %u restart%s)\n  queue:    %s  tier %s  priority "
      "%d\n"
      "  user:     %s\n  gpus:     %s in %d tasks\n  submitted %s\n",
      static_cast<unsigned long long>(v.id), v.name.c_str(), v.state.c_str(), v.attempt, v.restarts,
      v.restarts == 1 ? "" : "s", v.queue.c_str(), v.tier.c_str(), v.priority, v.user.c_str(),
      Gpus(v.gpus).c_str(), v.tasks, FormatUtcTimestamp(v.submitted).c_str());
  if (v.started) std::printf("  started   %s\n", FormatUtcTimestamp(v.started).c_str());
  if (v.ended) std::printf("  ended     %s\n", FormatUtcTimestamp(v.ended).c_str());
  if (!v.reason.empty()) std::printf("  reason:   %s\n", v.reason.c_str());
  if (!v.task_views.empty()) {
    // The GPUs' indices on their node ("0" is GPU 0, not "no GPUs"): so headed.
    Table t({"  TASK", "GROUP", "NODE", "GPU INDICES", "STATE", "EXIT"});
    for (const auto& tv : v.task_views) {
      std::string gpus;
      for (uint32_t g : tv.gpus) gpus += (gpus.empty() ? "" : ",") + std::to_string(g);
      t.Add(
          {"  " + std::to_string(tv.index), tv.group, tv.node, gpus.empty() ? "-" : gpus, tv.state,
           tv.state == "ended"
               ? (tv.signal ? "signal " + std::to_string(tv.signal) : std::to_string(tv.exit_code))
               : "-"});
    }
    std::printf("%s", t.Render().c_str());
  }
  PrintProgress(v.progress);
  return Status::Ok();
}

// `hangar explain`'s lines on the nodes a gang replaced in place (docs/goodput.md).
void PrintReplacements(const nlohmann::json& r) {
  for (const auto& x : r.value("replacements", nlohmann::json::array())) {
    const std::string failed = x.value("failed", ""), with = x.value("with", "");
    const std::string by = with == failed            ? "itself, back in service"
                           : x.value("spare", false) ? "spare " + with
                                                     : "free node " + with;
    std::printf("  attempt %u: node %s replaced by %s at %s (%s)\n", x.value("attempt", 0u),
                failed.c_str(), by.c_str(),
                FormatUtcTimestamp(x.value("at_ms", int64_t{0})).c_str(),
                x.value("why", "").c_str());
  }
  if (r.value("waiting", false))
    std::printf("  restarts in place once the previous attempt's tasks have stopped\n");
  if (r.contains("holding")) {
    const auto& h = r["holding"];
    std::string nodes;
    for (const auto& n : h.value("nodes", nlohmann::json::array()))
      nodes += (nodes.empty() ? "" : ", ") + n.get<std::string>();
    std::printf(
        "  holds its healthy nodes (%s) until %s for a node to replace %s "
        "(on_node_failure.wait_for_node); then it restarts there, or is placed whole\n",
        nodes.c_str(), FormatUtcTimestamp(h.value("until_ms", int64_t{0})).c_str(),
        h.value("failed", "").c_str());
  }
}

Status Explain(const Common& c, const std::string& id) {
  // A service's name (service names start with a letter; job ids are numbers).
  if (!id.empty() && std::islower(static_cast<unsigned char>(id[0]))) return ExplainService(c, id);
  HANGAR_RETURN_IF_ERROR(CheckJobId(id));
  HANGAR_ASSIGN_OR_RETURN(auto r, ApiClient(c.server).Get("/v1/jobs/" + id + "/explain"));
  if (c.output == "json") return PrintJson(r), Status::Ok();
  std::printf("job %s (%s) is %s", id.c_str(), r.value("name", "").c_str(),
              r.value("state", "").c_str());
  const std::string reason = r.value("reason", ""), rule = r.value("rule", "");
  if (!reason.empty()) std::printf(": %s", reason.c_str());
  if (!rule.empty() && rule != "none") std::printf("  [rule: %s]", rule.c_str());
  if (r.contains("estimated_start_ms") && r["estimated_start_ms"].is_number()) {
    std::printf("; estimated start %s",
                FormatUtcTimestamp(r["estimated_start_ms"].get<int64_t>()).c_str());
  }
  std::printf("\n");
  if (r.contains("progress")) PrintProgress(r["progress"]);
  if (r.contains("replaced")) PrintReplacements(r["replaced"]);
  if (r.contains("service")) return ExplainService(c, r["service"].get<std::string>());
  return Status::Ok();
}

// Waits (polling) until task `task` of job `id` has started, so that `logs -f` on a pending job
// follows it from its first line. Says once on stderr that it waits, and why.
Status WaitForTask(ApiClient& api, const std::string& id, int task) {
  bool noted = false;
  while (true) {
    HANGAR_ASSIGN_OR_RETURN(auto r, api.Get("/v1/jobs/" + id));
    HANGAR_ASSIGN_OR_RETURN(api::JobView v, api::JobViewFromJson(r));
    if (task >= v.tasks) {
      return Status::NotFound("job " + id + " has no task " + std::to_string(task) + " (it has " +
                              std::to_string(v.tasks) + "); pass --task 0.." +
                              std::to_string(v.tasks - 1));
    }
    for (const auto& tv : v.task_views) {
      if (static_cast<int>(tv.index) == task && tv.state != "launching") return Status::Ok();
    }
    if (v.state == "succeeded" || v.state == "failed" || v.state == "cancelled") {
      return Status::FailedPrecondition("job " + id + " ended (" + v.state + ") before task " +
                                        std::to_string(task) + " started; it has no logs");
    }
    if (!noted) {
      std::fprintf(stderr, "job %s is %s%s; waiting for it to start (Ctrl-C to stop)\n", id.c_str(),
                   v.state.c_str(), v.reason.empty() ? "" : (": " + v.reason).c_str());
      noted = true;
    }
    std::this_thread::sleep_for(kLogsPollInterval);
  }
}

// A task that wrote only to stderr shows nothing on `hangar logs`: say where its output is.
void NoteStderrOnly(ApiClient& api, const std::string& stdout_path, const LogsOptions& o) {
  size_t bytes = 0;
  const Status s = api.Stream(stdout_path + "&stream=stderr", [&bytes](const char*, size_t n) {
    bytes += n;
    return true;
  });
  if (!s.ok() || bytes == 0) return;
  std::fprintf(
      stderr,
      "(task %d wrote nothing to stdout; its stderr has %zu bytes: hangar logs %s%s --stderr)\n",
      o.task, bytes, o.id.c_str(), o.task ? (" --task " + std::to_string(o.task)).c_str() : "");
}

Status Logs(const Common& c, const LogsOptions& o) {
  HANGAR_RETURN_IF_ERROR(CheckJobId(o.id));
  if (o.task < 0)
    return Status::InvalidArgument("--task must be a task index (0, 1, ...), not " +
                                   std::to_string(o.task));
  ApiClient api(c.server);
  if (o.follow) HANGAR_RETURN_IF_ERROR(WaitForTask(api, o.id, o.task));
  std::string path = "/v1/jobs/" + o.id + "/logs?task=" + std::to_string(o.task) +
                     (o.follow ? "&follow=1" : "") + (o.stderr_stream ? "&stream=stderr" : "") +
                     (o.attempt >= 0 ? "&attempt=" + std::to_string(o.attempt) : "");
  size_t written = 0;
  Status s = api.Stream(path, [&written](const char* d, size_t n) {
    std::fwrite(d, 1, n, stdout);
    std::fflush(stdout);
    written += n;
    return true;
  });
  if (s.code() == StatusCode::kFailedPrecondition && !o.follow) {  // not started yet
    return Status(s.code(), s.message() + "; `hangar logs -f " + o.id + "` waits for it to start");
  }
  if (s.ok() && written == 0 && !o.stderr_stream) NoteStderrOnly(api, path, o);
  return s;
}

Status Nodes(const Common& c) {
  HANGAR_ASSIGN_OR_RETURN(auto r, ApiClient(c.server).Get("/v1/nodes"));
  if (c.output == "json") return PrintJson(r), Status::Ok();
  Table t(
      {"NAME", "STATE", "LEAF", "MODEL", "GPUS", "FREE", "CPU FREE", "MEM FREE", "JOBS", "REASON"});
  for (const auto& j : r["nodes"]) {
    HANGAR_ASSIGN_OR_RETURN(api::NodeView v, api::NodeViewFromJson(j));
    std::string reason = v.reason;
    for (const auto& cond : v.conditions) reason += (reason.empty() ? "" : "; ") + cond;
    // A node no agent serves (never registered, gone, lost) has nothing free to use, whatever
    // its capacity: "-", not its 8 idle GPUs.
    const bool served = v.state != "unknown" && v.state != "disconnected" && v.state != "lost";
    t.Add({v.name, v.state, v.leaf, v.model, std::to_string(v.gpus),
           served ? Gpus(v.gpus_free) : "-", served ? FormatMilli(v.milli_cpu_free) : "-",
           served ? FormatMemoryMiB(v.memory_mib_free) : "-", std::to_string(v.jobs.size()),
           Short(reason, 60)});
  }
  std::printf("%s", t.Render().c_str());
  return Status::Ok();
}

Status ShowNode(const Common& c, const std::string& name) {
  HANGAR_ASSIGN_OR_RETURN(auto r, ApiClient(c.server).Get("/v1/nodes/" + name));
  if (c.output == "json") return PrintJson(r), Status::Ok();
  HANGAR_ASSIGN_OR_RETURN(api::NodeView v, api::NodeViewFromJson(r));
  std::printf(
      "node %s  %s%s\n  fabric: leaf %s, spine %s\n  gpus:   %d x %s, %s free\n  address: %s\n",
      v.name.c_str(), v.state.c_str(), v.reason.empty() ? "" : (" (" + v.reason + ")").c_str(),
      v.leaf.c_str(), v.spine.c_str(), v.gpus, v.model.c_str(), Gpus(v.gpus_free).c_str(),
      v.address.c_str());
  for (const auto& cond : v.conditions) std::printf("  condition: %s\n", cond.c_str());
  std::string jobs;
  for (uint64_t id : v.jobs) jobs += (jobs.empty() ? "" : ", ") + std::to_string(id);
  std::printf("  jobs:   %s\n", jobs.empty() ? "none" : (jobs + "  (hangar job ID)").c_str());
  if (r.contains("events")) {
    std::printf("  history:\n");
    for (const auto& e : r["events"]) {
      std::printf("    %s  %s\n", FormatUtcTimestamp(e.value("time_ms", int64_t{0})).c_str(),
                  e.value("message", "").c_str());
    }
  }
  return Status::Ok();
}

Status Drain(const Common& c, const std::string& node, const std::string& reason, bool on) {
  HANGAR_ASSIGN_OR_RETURN(
      auto r, ApiClient(c.server).Post("/v1/nodes/" + node + (on ? "/drain" : "/undrain"),
                                       nlohmann::json{{"reason", reason}}.dump()));
  if (c.output == "json")
    PrintJson(r);
  else if (on)
    std::printf(
        "node %s drained: no new work will be placed on it, and its running jobs are requeued with "
        "their checkpoint signal\n",
        node.c_str());
  else
    std::printf("node %s undrained\n", node.c_str());
  return Status::Ok();
}

Status Remediate(const Common& c, const std::string& node, const std::string& remedy, int gpu,
                 const std::string& note) {
  nlohmann::json body = {{"remedy", remedy}, {"note", note}};
  if (gpu >= 0) body["gpu"] = gpu;
  HANGAR_ASSIGN_OR_RETURN(
      auto r, ApiClient(c.server).Post("/v1/nodes/" + node + "/remediate", body.dump()));
  if (c.output == "json")
    PrintJson(r);
  else
    std::printf("node %s: %s recorded; it takes work again once it passes validation\n",
                node.c_str(), remedy.c_str());
  return Status::Ok();
}

Status DecideOrphans(const Common& c, const std::string& node, bool stop) {
  HANGAR_ASSIGN_OR_RETURN(
      auto r,
      ApiClient(c.server).Post("/v1/nodes/" + node + "/orphans",
                               nlohmann::json{{"decision", stop ? "stop" : "release"}}.dump()));
  if (c.output == "json")
    PrintJson(r);
  else if (stop)
    std::printf(
        "node %s: the tasks unknown to the store are being stopped; it takes work once they end\n",
        node.c_str());
  else
    std::printf("node %s: the tasks unknown to the store run on, and the node takes work again\n",
                node.c_str());
  return Status::Ok();
}

Status ResetSafetyValve(const Common& c) {
  HANGAR_ASSIGN_OR_RETURN(auto r, ApiClient(c.server).Post("/v1/health/safety-valve/reset", "{}"));
  if (c.output == "json")
    PrintJson(r);
  else
    std::printf("safety valve reset: health rules may drain nodes again\n");
  return Status::Ok();
}

Status Events(const Common& c, const EventsOptions& o) {
  const std::string& subject = o.subject;
  const int limit = o.limit;
  HANGAR_ASSIGN_OR_RETURN(auto r,
                          ApiClient(c.server).Get("/v1/events?limit=" + std::to_string(limit) +
                                                  (subject.empty() ? "" : "&subject=" + subject)));
  if (c.output == "json") return PrintJson(r), Status::Ok();
  Table t({"TIME", "SUBJECT", "EVENT"});
  for (const auto& e : r["events"]) {
    t.Add({FormatUtcTimestamp(e.value("time_ms", int64_t{0})), e.value("subject", ""),
           e.value("message", "")});
  }
  std::printf("%s", t.Render().c_str());
  return Status::Ok();
}

}  // namespace

void RegisterUserCommands(CLI::App& app, int* rc) {
  // Every command has its own Common too: flags of one never leak into another's defaults.
  auto add_id_command = [&](const char* name, const char* help,
                            Status (*run)(const Common&, const std::string&)) {
    auto c = std::make_shared<Common>();
    auto id = std::make_shared<std::string>();
    CLI::App* cmd = app.add_subcommand(name, help);
    cmd->add_option("id", *id, "Job id (a number: see `hangar jobs`)")->required();
    AddCommon(cmd, c.get());
    cmd->callback([=] { Guard(rc, [&] { return run(*c, *id); }); });
  };

  {
    auto c = std::make_shared<Common>();
    auto o = std::make_shared<SubmitOptions>();
    CLI::App* submit = app.add_subcommand("submit", "Submit a job file (docs/job-format.md)");
    submit->add_option("file", o->file, "Job file (YAML)")->required();
    submit->add_option(
        "--array", o->array,
        "Submit it as an array: 0-49, 0-48:2, 1,3,5-7; %8 caps how many run at once");
    submit->add_option(
        "--after", o->after,
        "Start after other jobs: ok:12:13 (succeeded), any:14 (ended), notok:15 (failed)");
    AddCommon(submit, c.get());
    submit->callback([=] { Guard(rc, [&] { return Submit(*c, *o); }); });
  }
  RegisterSbatchCommand(app, rc);  // sbatch_command.cc: a Slurm batch script as a job
  add_id_command("job", "Show one job, its tasks and where they run", ShowJob);
  add_id_command("explain",
                 "Why a job waits (or where it runs, or how it ended); for a service (its name, or "
                 "a replica's job), why it has its replicas",
                 Explain);
  {
    auto c = std::make_shared<Common>();
    auto o = std::make_shared<LogsOptions>();
    CLI::App* logs = app.add_subcommand("logs", "Print a task's output");
    logs->add_option("id", o->id, "Job id (a number: see `hangar jobs`)")->required();
    logs->add_option("--task", o->task, "Task index")->capture_default_str();
    logs->add_option(
        "--attempt", o->attempt,
        "An earlier attempt's (0, 1, ...; default: the current one, or the latest that ran)");
    logs->add_flag("-f,--follow", o->follow,
                   "Keep printing until the task ends (waits for a pending job to start)");
    logs->add_flag("--stderr", o->stderr_stream, "Standard error instead of standard output");
    AddCommon(logs, c.get());
    logs->callback([=] { Guard(rc, [&] { return Logs(*c, *o); }); });
  }
  {
    auto c = std::make_shared<Common>();
    CLI::App* nodes = app.add_subcommand("nodes", "List nodes, their state and free capacity");
    AddCommon(nodes, c.get());
    nodes->callback([=] { Guard(rc, [&] { return Nodes(*c); }); });
  }
  {
    auto c = std::make_shared<Common>();
    auto name = std::make_shared<std::string>();
    CLI::App* node = app.add_subcommand("node", "Show one node and its history");
    node->add_option("name", *name, "Node name")->required();
    AddCommon(node, c.get());
    node->callback([=] { Guard(rc, [&] { return ShowNode(*c, *name); }); });
  }
  {
    auto c = std::make_shared<Common>();
    auto o = std::make_shared<DrainOptions>();
    CLI::App* drain = app.add_subcommand(
        "drain",
        "Place no new work on a node and requeue its running jobs (with their checkpoint signal)");
    drain->add_option("node", o->node, "Node name")->required();
    drain->add_option("--reason", o->reason, "Why (kept with the node)")->required();
    AddCommon(drain, c.get());
    drain->callback([=] { Guard(rc, [&] { return Drain(*c, o->node, o->reason, true); }); });
  }
  {
    auto c = std::make_shared<Common>();
    auto name = std::make_shared<std::string>();
    CLI::App* undrain = app.add_subcommand("undrain", "Let a drained node take work again");
    undrain->add_option("node", *name, "Node name")->required();
    AddCommon(undrain, c.get());
    undrain->callback([=] { Guard(rc, [&] { return Drain(*c, *name, "", false); }); });
  }
  {
    auto c = std::make_shared<Common>();
    auto o = std::make_shared<RemediateOptions>();
    CLI::App* remediate = app.add_subcommand(
        "remediate", "Record a GPU reset, node reboot or repair; validation follows");
    remediate->add_option("node", o->node, "Node name")->required();
    remediate->add_option("--remedy", o->remedy, "gpu-reset, reboot or repair")
        ->required()
        ->check(CLI::IsMember({"gpu-reset", "reboot", "repair"}));
    remediate->add_option("--gpu", o->gpu, "The GPU index (gpu-reset; repair of one GPU)");
    remediate->add_option("--note", o->note, "What was done, kept in the node's history");
    AddCommon(remediate, c.get());
    remediate->callback(
        [=] { Guard(rc, [&] { return Remediate(*c, o->node, o->remedy, o->gpu, o->note); }); });
  }
  {
    auto c = std::make_shared<Common>();
    auto o = std::make_shared<std::pair<std::string, std::string>>();  // node, decision
    CLI::App* orphans = app.add_subcommand("orphans",
                                           "Decide on the tasks a node runs that the store does "
                                           "not know (held, running, since its agent "
                                           "registered): stop them, or release them to run on");
    orphans->add_option("node", o->first, "Node name")->required();
    auto* stop = orphans->add_flag_callback(
        "--stop", [o] { o->second = "stop"; }, "Stop them");
    auto* release = orphans->add_flag_callback(
        "--release", [o] { o->second = "release"; },
        "Let them run on, unknown to the store, and the node take work again");
    stop->excludes(release);
    AddCommon(orphans, c.get());
    orphans->callback([=] {
      Guard(rc, [&] {
        if (o->second.empty())
          return Status::InvalidArgument("say what becomes of them: --stop or --release");
        return DecideOrphans(*c, o->first, o->second == "stop");
      });
    });
  }
  {
    auto c = std::make_shared<Common>();
    CLI::App* valve = app.add_subcommand(
        "reset-safety-valve", "Let health rules drain nodes again after the valve tripped");
    AddCommon(valve, c.get());
    valve->callback([=] { Guard(rc, [&] { return ResetSafetyValve(*c); }); });
  }
  {
    auto c = std::make_shared<Common>();
    auto o = std::make_shared<EventsOptions>();
    CLI::App* events = app.add_subcommand("events", "What happened, newest first");
    // `hangar events job/42` as well as --subject: a user may read only their own jobs' events.
    events->add_option("subject,--subject", o->subject, "Only events of e.g. node/gpu-1 or job/42");
    events->add_option("--limit", o->limit, "How many")->capture_default_str();
    AddCommon(events, c.get());
    events->callback([=] { Guard(rc, [&] { return Events(*c, *o); }); });
  }
  RegisterBatchCommands(app, rc);
}

}  // namespace hangar::cli
