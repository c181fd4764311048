#include "cli/slurm_tools.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <set>

#include "api/views.h"
#include "cli/client.h"
#include "cli/slurm_common.h"
#include "cli/slurm_format.h"
#include "cli/slurm_salloc.h"
#include "cli/slurm_srun.h"
#include "cli/squeue.h"
#include "common/time.h"

namespace hangar::cli {
namespace {

namespace fs = std::filesystem;
using namespace slurm;

std::string SqueueValue(const api::JobView& j, char letter, Time now) {
  const std::vector<std::string> nodes = slurm::JobNodes(j);
  switch (letter) {
    case 'i':
      return slurm::JobId(j);
    case 'A':
      return std::to_string(j.id);
    case 'F':
      return std::to_string(j.array_id ? j.array_id : j.id);
    case 'K':
      return j.array_index >= 0 ? std::to_string(j.array_index) : "N/A";
    case 'j':
      return j.name;
    case 'u':
      return j.user;
    case 'P':
      return j.queue;
    case 'a':
      return j.account.empty() ? j.queue : j.account;
    case 't':
      return SlurmStateLetters(j.state);
    case 'T':
      return slurm::JobState(j);
    case 'M':
      return Elapsed(j, now);
    case 'l':
      return slurm::TimeLimit(j);
    case 'D':
      return std::to_string(nodes.empty() ? std::max(1, j.tasks) : static_cast<int>(nodes.size()));
    case 'N':
      return CompressHostList(nodes);
    case 'R':
      return j.state == "pending" ? "(" + (j.reason.empty() ? std::string("None") : j.reason) + ")"
                                  : CompressHostList(nodes);
    case 'r':
      return j.reason.empty() ? "None" : j.reason;
    case 'V':
      return slurm::Timestamp(j.submitted, "N/A");
    case 'S':
      return slurm::Timestamp(j.started, "N/A");
    case 'e':
      return slurm::Timestamp(j.ended, "N/A");
    case 'q':
      return j.tier;
    case 'Q':
      return std::to_string(j.priority);
    case 'b':
      return "gpu:" + FormatGpus(j.gpus);
    case '%':
      return "%";
    default:
      return "";
  }
}

int Squeue(ApiClient* api, const std::vector<std::string>& argv) {
  Args a;
  Status ok = a.Parse("squeue", argv,
                      {{"j", "jobs", true},
                       {"u", "user", true},
                       {"n", "name", true},
                       {"t", "states", true},
                       {"p", "partition", true},
                       {"o", "format", true},
                       {"h", "noheader", false},
                       {"", "me", false},
                       {"a", "all", false},
                       {"l", "long", false},
                       {"r", "array", false},
                       {"i", "iterate", true},
                       {"", "sort", true},
                       {"S", "sort", true}});
  if (!ok.ok()) return Fail("squeue", ok);
  if (a.Has("iterate"))
    return Fail("squeue",
                Status::InvalidArgument("--iterate is not supported; use `watch squeue`"));
  const std::string format =
      a.Get("format", a.Has("long") ? "%.18i %.9P %.8j %.8u %.8T %.10M %.9l %.6D %R"
                                    : "%.18i %.9P %.8j %.8u %.2t %.10M %.6D %R");
  auto fields = slurm::ParseSqueueFormat(format);
  if (!fields.ok()) return Fail("squeue", fields.status());
  auto jobs = SelectJobs(api, a, true, "");
  if (!jobs.ok()) return Fail("squeue", jobs.status());
  static const std::map<char, std::string> kHeaders = {{'i', "JOBID"},
                                                       {'A', "JOBID"},
                                                       {'F', "ARRAY_JOB_ID"},
                                                       {'K', "ARRAY_TASK_ID"},
                                                       {'j', "NAME"},
                                                       {'u', "USER"},
                                                       {'P', "PARTITION"},
                                                       {'a', "ACCOUNT"},
                                                       {'t', "ST"},
                                                       {'T', "STATE"},
                                                       {'M', "TIME"},
                                                       {'l', "TIME_LIMIT"},
                                                       {'D', "NODES"},
                                                       {'N', "NODELIST"},
                                                       {'R', "NODELIST(REASON)"},
                                                       {'r', "REASON"},
                                                       {'V', "SUBMIT_TIME"},
                                                       {'S', "START_TIME"},
                                                       {'e', "END_TIME"},
                                                       {'q', "QOS"},
                                                       {'Q', "PRIORITY"},
                                                       {'b', "TRES_PER_NODE"},
                                                       {'%', "%"}};
  const Time now = WallNow();
  auto line = [&](const std::function<std::string(const Field&)>& value) {
    std::string out;
    for (const Field& f : *fields)
      out += f.literal + (f.name.empty() ? "" : slurm::Fit(value(f), f));
    while (!out.empty() && out.back() == ' ') out.pop_back();
    std::printf("%s\n", out.c_str());
  };
  if (!a.Has("noheader")) {
    line([&](const Field& f) {
      auto it = kHeaders.find(f.name[0]);
      return it == kHeaders.end() ? f.name : it->second;
    });
  }
  for (const auto& j : *jobs) line([&](const Field& f) { return SqueueValue(j, f.name[0], now); });
  return 0;
}

// sacct's --format values, by lower-case field name; nullopt for a field this sacct lacks.

std::optional<std::string> SacctValue(const api::JobView& j, const std::string& field, Time now) {
  const std::string f = Lower(field);
  const std::vector<std::string> nodes = slurm::JobNodes(j);
  if (f == "jobid") return slurm::JobId(j);
  if (f == "jobidraw") return std::to_string(j.id);
  if (f == "jobname") return j.name;
  if (f == "partition") return j.queue;
  if (f == "account") return j.account.empty() ? j.queue : j.account;
  if (f == "user") return j.user;
  if (f == "state") return slurm::JobState(j);
  if (f == "exitcode") return slurm::ExitCode(j);
  if (f == "elapsed") return Elapsed(j, now);
  if (f == "elapsedraw")
    return std::to_string(j.started ? ((j.ended ? j.ended : now) - j.started) / kSecond : 0);
  if (f == "submit") return slurm::Timestamp(j.submitted);
  if (f == "start") return slurm::Timestamp(j.started);
  if (f == "end") return slurm::Timestamp(j.ended);
  if (f == "nodelist") return nodes.empty() ? "None assigned" : CompressHostList(nodes);
  if (f == "nnodes") return std::to_string(nodes.empty() ? 0 : nodes.size());
  if (f == "ntasks") return std::to_string(j.tasks);
  if (f == "reason") return j.reason.empty() ? "None" : j.reason;
  if (f == "timelimit") return slurm::TimeLimit(j);
  if (f == "priority") return std::to_string(j.priority);
  if (f == "qos") return j.tier;
  if (f == "allocgres" || f == "alloctres") return "gres/gpu=" + FormatGpus(j.gpus);
  return std::nullopt;
}

// A step's row (JOB.STEP, from GET /v1/jobs/ID/steps): its own id, name, nodes, times and end;
// the rest is its job's.
std::optional<std::string> SacctStepValue(const api::JobView& j, const nlohmann::json& step,
                                          const std::string& field, Time now) {
  const std::string f = Lower(field);
  if (f == "jobid") return slurm::JobId(j) + "." + std::to_string(step.value("step_id", 0));
  if (f == "jobidraw") return std::to_string(j.id) + "." + std::to_string(step.value("step_id", 0));
  if (f == "jobname") return step.value("name", "");
  if (f == "state") return step.value("state", "");
  if (f == "exitcode")
    return std::to_string(step.value("exit_code", 0)) + ":" +
           std::to_string(step.value("signal", 0));
  if (f == "nodelist") return step.value("nodelist", "");
  if (f == "nnodes") return std::to_string(step.value("nodes", 0));
  if (f == "ntasks") return std::to_string(step.value("tasks", 0));
  api::JobView times = j;  // the step's own times, read as a job's are
  times.started = step.value("start", Time{0});
  times.ended = step.value("end", Time{0});
  if (f == "elapsed" || f == "elapsedraw" || f == "start" || f == "end" || f == "submit") {
    if (f == "submit") times.submitted = times.started;
    return SacctValue(times, field, now);
  }
  return SacctValue(j, field, now);
}

int Sacct(ApiClient* api, const std::vector<std::string>& argv) {
  Args a;
  Status ok = a.Parse("sacct", argv,
                      {{"j", "jobs", true},
                       {"u", "user", true},
                       {"", "name", true},
                       {"s", "states", true},
                       {"r", "partition", true},
                       {"o", "format", true},
                       {"n", "noheader", false},
                       {"P", "parsable2", false},
                       {"p", "parsable", false},
                       {"X", "allocations", false},
                       {"S", "starttime", true},
                       {"a", "allusers", false},
                       {"b", "brief", false},
                       {"l", "long", false},
                       {"A", "accounts", true}});
  if (!ok.ok()) return Fail("sacct", ok);
  std::string format = a.Get("format", "JobID%12,JobName,Partition,Account,State,ExitCode%8");
  if (a.Has("brief")) format = "JobID%12,State,ExitCode%8";
  auto fields = slurm::ParseSacctFormat(format);
  if (!fields.ok()) return Fail("sacct", fields.status());
  const Time now = WallNow();
  for (const Field& f : *fields) {
    api::JobView probe;
    if (!SacctValue(probe, f.name, now)) {
      return Fail(
          "sacct",
          Status::InvalidArgument(
              "--format field '" + f.name +
              "' is not one hangar's sacct has: JobID, JobIDRaw, JobName, Partition, Account, "
              "User, "
              "State, ExitCode, Elapsed, ElapsedRaw, Submit, Start, End, NodeList, NNodes, NTasks, "
              "Reason, Timelimit, Priority, QOS, AllocTRES"));
    }
  }
  // Without -j or -S, as Slurm: jobs since midnight (UTC here).
  std::string since = a.Get("starttime");
  if (since.empty() && !a.Has("jobs")) since = std::to_string(now - now % (86400 * kSecond));
  auto jobs = SelectJobs(api, a, false, since);
  if (!jobs.ok()) return Fail("sacct", jobs.status());
  const bool parsable = a.Has("parsable2") || a.Has("parsable");
  for (Field& f : *fields) {  // sacct's own widths where the list gives none
    const std::string n = Lower(f.name);
    if (!f.width)
      f.width = n == "jobid" || n == "jobidraw"               ? 12
                : n == "exitcode"                             ? 8
                : n == "nodelist"                             ? 15
                : n == "submit" || n == "start" || n == "end" ? 19
                                                              : 10;
    f.right = n != "jobid" && n != "jobidraw";
  }
  auto line = [&](const std::function<std::string(const Field&)>& value) {
    std::string out;
    for (size_t i = 0; i < fields->size(); ++i) {
      const Field& f = (*fields)[i];
      if (parsable) {
        out += value(f) + (i + 1 < fields->size() || a.Has("parsable") ? "|" : "");
      } else {
        out += slurm::Fit(value(f), f) + " ";
      }
    }
    std::printf("%s\n", out.c_str());
  };
  if (!a.Has("noheader")) {
    line([](const Field& f) { return f.name; });
    if (!parsable)
      line([](const Field& f) { return std::string(static_cast<size_t>(f.width), '-'); });
  }
  // Each job's steps follow it, as in Slurm (not with -X, and only for a short list: one call
  // each).
  const bool steps = !a.Has("allocations") && (a.Has("jobs") || jobs->size() <= 50);
  for (const auto& j : *jobs) {
    line([&](const Field& f) { return *SacctValue(j, f.name, now); });
    if (!steps || j.started == 0) continue;
    auto list = api->Get("/v1/jobs/" + std::to_string(j.id) + "/steps");
    if (!list.ok() || !list->contains("steps")) continue;  // a controller without steps
    for (const auto& st : (*list)["steps"]) {
      line([&](const Field& f) { return *SacctStepValue(j, st, f.name, now); });
    }
  }
  return 0;
}

const char* const kTools[] = {"squeue", "sacct", "scontrol", "scancel", "sinfo", "sacctmgr"};

}  // namespace

int RunSlurmTool(const std::string& tool, const std::vector<std::string>& args,
                 const std::string& server) {
  ApiClient api(server);
  if (tool == "squeue") return Squeue(&api, args);
  if (tool == "sacct") return Sacct(&api, args);
  if (tool == "scontrol") return Scontrol(&api, args);
  if (tool == "scancel") return Scancel(&api, args);
  if (tool == "sinfo") return Sinfo(&api, args);
  if (tool == "sacctmgr") return Sacctmgr(&api, args);
  if (tool == "srun") return RunSrunInJob(args);
  if (tool == "salloc") return RunSalloc(args, server);
  return Fail(tool, Status::InvalidArgument(
                        "not a Slurm command hangar has: squeue, sacct, scontrol, scancel, sinfo, "
                        "sacctmgr (and sbatch: hangar sbatch)"));
}

std::vector<std::string> InstallSlurmCommands(const std::string& dir,
                                              const std::string& hangar_binary,
                                              std::string* error) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) {
    *error = "cannot create " + dir + ": " + ec.message();
    return {};
  }
  std::vector<std::string> written;
  std::string quoted = "'";
  for (char c : hangar_binary) quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
  quoted += "'";
  std::vector<std::pair<std::string, std::string>> scripts;
  for (const char* t : kTools) scripts.emplace_back(t, "slurm " + std::string(t));
  scripts.emplace_back("sbatch", "sbatch");
  scripts.emplace_back("srun", "slurm srun");
  scripts.emplace_back("salloc", "slurm salloc");
  for (const auto& [name, sub] : scripts) {
    const std::string path = dir + "/" + name;
    const std::string tmp = path + ".tmp";
    {
      std::ofstream out(tmp);
      out << "#!/bin/sh\n# Slurm's " << name
          << " over Hangar's API (hangar slurm install; docs/slurm.md).\nexec " << quoted << " "
          << sub << " \"$@\"\n";
      if (!out) {
        *error = "cannot write " + tmp;
        return written;
      }
    }
    chmod(tmp.c_str(), 0755);
    fs::rename(tmp, path, ec);
    if (ec) {
      *error = "cannot write " + path + ": " + ec.message();
      return written;
    }
    written.push_back(name);
  }
  return written;
}

void RegisterSlurmCommands(CLI::App& app, int* rc) {
  auto* c = app.add_subcommand(
      "slurm",
      "Slurm's client commands over Hangar's API: hangar slurm squeue|sacct|scontrol|"
      "scancel|sinfo|sacctmgr ARGS (Slurm's arguments and formats), or hangar slurm "
      "install DIR (writes them as commands of those names; docs/slurm.md)");
  c->prefix_command();
  c->callback([c, rc] {
    std::vector<std::string> args = c->remaining();
    if (args.empty()) {
      std::fprintf(stderr,
                   "error: name a Slurm command: hangar slurm "
                   "squeue|sacct|scontrol|scancel|sinfo|sacctmgr ARGS, "
                   "or hangar slurm install DIR\n");
      *rc = 2;
      return;
    }
    const std::string tool = args.front();
    args.erase(args.begin());
    if (tool == "install") {
      // hangar slurm install DIR [--hangar PATH]: PATH is the hangar the commands run (the
      // package's /usr/bin/hangar); this one by default.
      std::error_code ec;
      std::string self = fs::read_symlink("/proc/self/exe", ec).string();
      if (args.size() == 3 && args[1] == "--hangar") {
        self = args[2];
        args.resize(1);
      }
      if (args.size() != 1 || args[0].empty() || args[0][0] == '-') {
        std::fprintf(
            stderr,
            "error: hangar slurm install DIR [--hangar PATH]: name the folder to write the "
            "commands into\n");
        *rc = 2;
        return;
      }
      std::string error;
      const auto names = InstallSlurmCommands(args[0], self, &error);
      if (!error.empty()) {
        std::fprintf(stderr, "error: %s\n", error.c_str());
        *rc = 1;
        return;
      }
      std::string list;
      for (const auto& n : names) list += (list.empty() ? "" : " ") + n;
      std::printf(
          "wrote %s into %s; put it first on PATH only where no real Slurm is wanted: "
          "export PATH=%s:$PATH\n",
          list.c_str(), args[0].c_str(), args[0].c_str());
      return;
    }
    *rc = RunSlurmTool(tool, args, "");
  });
}

}  // namespace hangar::cli