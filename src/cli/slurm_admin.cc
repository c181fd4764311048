// scontrol, scancel, sinfo and sacctmgr over Hangar's API (slurm_tools.h).
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <map>

#include "cli/slurm_common.h"
#include "cli/slurm_reservation.h"
#include "cli/squeue.h"

namespace hangar::cli::slurm {
namespace {

void PrintJob(const api::JobView& j, bool one_line) {
  const std::vector<std::string> nodes = slurm::JobNodes(j);
  const Time now = WallNow();
  std::vector<std::vector<std::string>> groups = {
      {"JobId=" + std::to_string(j.id), "JobName=" + j.name},
      {"UserId=" + j.user, "Account=" + j.queue, "QOS=" + j.tier,
       "Priority=" + std::to_string(j.priority)},
      {"JobState=" + slurm::JobState(j),
       "Reason=" + (j.state == "pending" && !j.reason.empty() ? j.reason : "None"),
       "Dependency=(null)"},
      {"Requeue=1", "Restarts=" + std::to_string(j.restarts), "ExitCode=" + slurm::ExitCode(j)},
      {"RunTime=" + Elapsed(j, now), "TimeLimit=" + slurm::TimeLimit(j)},
      {"SubmitTime=" + slurm::Timestamp(j.submitted), "StartTime=" + slurm::Timestamp(j.started),
       "EndTime=" + slurm::Timestamp(j.ended)},
      {"Partition=" + j.queue, "NodeList=" + (nodes.empty() ? "(null)" : CompressHostList(nodes))},
      {"NumNodes=" + std::to_string(nodes.empty() ? 1 : nodes.size()),
       "NumTasks=" + std::to_string(j.tasks)},
      {"TRES=gres/gpu=" + FormatGpus(j.gpus)},
  };
  if (j.array_id) {
    groups[0].insert(groups[0].begin() + 1, {"ArrayJobId=" + std::to_string(j.array_id),
                                             "ArrayTaskId=" + std::to_string(j.array_index)});
  }
  std::string out;
  for (size_t g = 0; g < groups.size(); ++g) {
    std::string row;
    for (const auto& kv : groups[g]) row += (row.empty() ? "" : " ") + kv;
    out += one_line ? (g ? " " : "") + row : (g ? "   " : "") + row + "\n";
  }
  std::printf("%s%s", out.c_str(), one_line ? "\n" : "\n");
}

void PrintNode(const api::NodeView& n, bool one_line) {
  const std::vector<std::string> kv = {
      "NodeName=" + n.name,
      "State=" + slurm::NodeState(n, false),
      "Gres=gpu:" + n.model + ":" + std::to_string(n.gpus),
      "GresUsed=gpu:" + FormatGpus(n.gpus - n.gpus_free),
      "CPUTot=" + std::to_string(n.milli_cpu / 1000),
      "RealMemory=" + std::to_string(n.memory_mib),
      "FreeMem=" + std::to_string(n.memory_mib_free),
      "Reason=" + (n.reason.empty() ? std::string("(null)") : n.reason)};
  std::string out;
  for (size_t i = 0; i < kv.size(); ++i) out += (i ? (one_line ? " " : "\n   ") : "") + kv[i];
  std::printf("%s\n%s", out.c_str(), one_line ? "" : "\n");
}

std::string SinfoValue(const api::NodeView& n, const std::string& partition, char letter) {
  switch (letter) {
    case 'P':
    case 'R':
      return partition;
    case 'a':
      return "up";
    case 'l':
    case 'L':
      return "infinite";
    case 't':
      return slurm::NodeState(n, true);
    case 'T':
      return slurm::NodeState(n, false);
    case 'G':
      return "gpu:" + n.model + ":" + std::to_string(n.gpus);
    case 'c':
      return std::to_string(n.milli_cpu / 1000);
    case 'm':
      return std::to_string(n.memory_mib);
    case 'E':
      return n.reason.empty() ? "none" : n.reason;
    case '%':
      return "%";
    default:
      return "";
  }
}

}  // namespace

// scontrol show WHAT [ARG]: hostnames, hostname, job, node; -1 when WHAT is none of them.
static int ScontrolShow(ApiClient* api, const Args& a, const std::vector<std::string>& words) {
  const std::string what = Lower(words[1]);
  const std::string arg = words.size() >= 3 ? words[2] : "";
  if (what == "hostnames" || what == "hostname") {
    std::string list = arg;
    if (list.empty() && std::getenv("SLURM_JOB_NODELIST")) list = std::getenv("SLURM_JOB_NODELIST");
    if (list.empty()) {
      return Fail("scontrol",
                  Status::InvalidArgument("no host list given and SLURM_JOB_NODELIST is not set"));
    }
    auto names = slurm::ExpandHostList(list);
    if (!names.ok()) return Fail("scontrol", names.status());
    if (what == "hostname") {
      std::printf("%s\n", names->empty() ? "" : names->front().c_str());
      return 0;
    }
    for (const auto& n : *names) std::printf("%s\n", n.c_str());
    return 0;
  }
  if (what == "job" || what == "jobid" || what == "jobs") {
    std::vector<api::JobView> jobs;
    if (!arg.empty()) {
      auto j = FetchJob(api, arg);
      if (!j.ok() && j.status().code() == StatusCode::kNotFound) {
        return Fail("scontrol",
                    Status::NotFound("Invalid job id specified (job " + arg + " does not exist)"));
      }
      if (!j.ok()) return Fail("scontrol", j.status());
      jobs.push_back(*j);
    } else {
      auto all = ListJobs(api, "", {"pending", "starting", "running", "preempting"});
      if (!all.ok()) return Fail("scontrol", all.status());
      jobs = *all;
    }
    for (const auto& j : jobs) PrintJob(j, a.Has("oneliner"));
    return 0;
  }
  if (what == "node" || what == "nodes") {
    auto list = api->Get(arg.empty() ? "/v1/nodes" : "/v1/nodes/" + arg);
    if (!list.ok()) return Fail("scontrol", list.status());
    const nlohmann::json rows = arg.empty() ? list->value("nodes", nlohmann::json::array())
                                            : nlohmann::json::array({*list});
    for (const auto& r : rows) {
      auto n = api::NodeViewFromJson(r);
      if (n.ok()) PrintNode(*n, a.Has("oneliner"));
    }
    return 0;
  }
  return -1;
}

int Scontrol(ApiClient* api, const std::vector<std::string>& argv) {
  Args a;
  Status ok = a.Parse("scontrol", argv,
                      {{"d", "details", false}, {"o", "oneliner", false}, {"Q", "quiet", false}});
  if (!ok.ok()) return Fail("scontrol", ok);
  std::vector<std::string> words = a.positional();
  if (words.empty()) {
    return Fail("scontrol",
                Status::InvalidArgument(
                    "say what to do: show hostnames|job|node, hold|release|requeue JOBID"));
  }
  const std::string verb = Lower(words[0]);
  if (const int rc = ScontrolReservation(api, words, WallNow()); rc >= 0) return rc;
  if (verb == "show" && words.size() >= 2) {
    if (const int rc = ScontrolShow(api, a, words); rc >= 0) return rc;
  }
  if ((verb == "hold" || verb == "release" || verb == "requeue" || verb == "uhold") &&
      words.size() >= 2) {
    const std::string action = verb == "uhold" ? "hold" : verb;
    for (const std::string& id : SplitCommas(words[1])) {
      auto j = FetchJob(api, id);
      if (!j.ok()) return Fail("scontrol", j.status());
      auto r = api->Post("/v1/jobs/" + std::to_string(j->id) + "/" + action, "{}");
      if (!r.ok()) return Fail("scontrol", r.status());
    }
    return 0;
  }
  if (verb == "update") {
    return Fail(
        "scontrol",
        Status::InvalidArgument(
            "hangar cannot change a submitted job (" + (words.size() > 1 ? words[1] : "") +
            "): cancel it and submit it again with the new values, or `hangar hold` it first"));
  }
  return Fail("scontrol", Status::InvalidArgument(
                              "'" + words[0] + (words.size() > 1 ? " " + words[1] : "") +
                              "' is not one hangar's scontrol does: show hostnames|hostname|job|"
                              "node|reservation, hold, release, requeue, create reservation, "
                              "delete ReservationName="));
}

int Scancel(ApiClient* api, const std::vector<std::string>& argv) {
  Args a;
  Status ok = a.Parse("scancel", argv,
                      {{"u", "user", true},
                       {"n", "name", true},
                       {"t", "state", true},
                       {"p", "partition", true},
                       {"s", "signal", true},
                       {"b", "batch", false},
                       {"f", "full", false},
                       {"q", "quiet", false},
                       {"v", "verbose", false},
                       {"i", "interactive", false},
                       {"", "me", false}});
  if (!ok.ok()) return Fail("scancel", ok);
  const std::string sig = a.Get("signal");
  if (!sig.empty() && sig != "TERM" && sig != "SIGTERM" && sig != "KILL" && sig != "SIGKILL" &&
      sig != "15" && sig != "9") {
    return Fail("scancel",
                Status::InvalidArgument(
                    "--signal=" + sig +
                    " is not sent here: hangar signals a job only to stop it (TERM or KILL "
                    "cancel it); a job's checkpoint signal goes out when it is preempted"));
  }
  int rc = 0;
  for (const std::string& id : a.positional()) {
    auto j = FetchJob(api, id);
    if (!j.ok()) {
      std::fprintf(stderr, "scancel: error: Kill job error on job id %s: %s\n", id.c_str(),
                   j.status().message().c_str());
      rc = 1;
      continue;
    }
    // ARRAYID alone is the whole array, as in Slurm.
    const bool whole_array = id.find('_') == std::string::npos && j->array_id == j->id;
    nlohmann::json body =
        whole_array ? nlohmann::json{{"array", j->id}} : nlohmann::json{{"ids", {j->id}}};
    auto r = api->Post("/v1/jobs/bulk/cancel", body.dump());
    if (!r.ok()) {
      std::fprintf(stderr, "scancel: error: Kill job error on job id %s: %s\n", id.c_str(),
                   r.status().message().c_str());
      rc = 1;
    }
  }
  if (a.positional().empty()) {
    nlohmann::json body = nlohmann::json::object();
    if (a.Has("user")) body["user"] = a.Get("user");
    if (a.Has("name")) body["name"] = a.Get("name");
    if (a.Has("partition")) body["queue"] = a.Get("partition");
    if (a.Has("state")) {
      auto s = slurm::HangarStates(a.Get("state"));
      if (!s.ok()) return Fail("scancel", s.status());
      if (s->size() == 1) body["state"] = s->front();
    }
    if (body.empty())
      return Fail("scancel", Status::InvalidArgument(
                                 "no job id given; name ids, or select with -u, -n, -p or -t"));
    auto r = api->Post("/v1/jobs/bulk/cancel", body.dump());
    if (!r.ok()) return Fail("scancel", r.status());
  }
  return rc;
}

// sinfo: one row per partition and node state (one per node with -N), or as -o groups them:
// rows whose shown fields agree are one, with their nodes counted (%D) and listed (%N).
int Sinfo(ApiClient* api, const std::vector<std::string>& argv) {
  Args a;
  Status ok = a.Parse("sinfo", argv,
                      {{"N", "Node", false},
                       {"h", "noheader", false},
                       {"p", "partition", true},
                       {"o", "format", true},
                       {"s", "summarize", false},
                       {"l", "long", false},
                       {"a", "all", false},
                       {"r", "responding", false},
                       {"R", "list-reasons", false}});
  if (!ok.ok()) return Fail("sinfo", ok);
  auto list = api->Get("/v1/nodes");
  if (!list.ok()) return Fail("sinfo", list.status());
  std::vector<api::NodeView> nodes;
  for (const auto& r : list->value("nodes", nlohmann::json::array())) {
    auto n = api::NodeViewFromJson(r);
    if (n.ok()) nodes.push_back(*n);
  }
  // Hangar's queues are Slurm's partitions, each over every node; "default" (else the first) is
  // the default one, marked with '*' as sinfo marks it.
  std::vector<std::string> queues;
  if (auto q = api->Get("/v1/queues"); q.ok()) {
    for (const auto& r : q->value("queues", nlohmann::json::array()))
      queues.push_back(r.value("name", ""));
  }
  if (queues.empty()) queues = {"default"};
  const std::string fallback =
      std::find(queues.begin(), queues.end(), "default") != queues.end() ? "default" : queues[0];
  if (a.Has("partition")) queues = SplitCommas(a.Get("partition"));
  const std::string format =
      a.Get("format", a.Has("Node") ? "%N %.5D %9P %6t" : "%9P %.5a %.10l %.5D %6t %N");
  auto fields = slurm::ParseSqueueFormat(format);
  if (!fields.ok()) return Fail("sinfo", fields.status());
  struct Row {
    std::vector<std::string> values;  // per field; %D and %N filled at the end
    std::vector<std::string> names;
  };
  std::vector<Row> rows;
  for (const std::string& q : queues) {
    const std::string shown = q + (q == fallback ? "*" : "");
    for (const auto& n : nodes) {
      Row r;
      for (const Field& f : *fields)
        r.values.push_back(f.name.empty() || f.name == "N" || f.name == "D"
                               ? ""
                               : SinfoValue(n, shown, f.name[0]));
      if (a.Has("Node")) r.values.push_back(n.name);  // a row per node
      auto same = std::find_if(rows.begin(), rows.end(),
                               [&](const Row& o) { return o.values == r.values; });
      if (same == rows.end()) {
        r.names.push_back(n.name);
        rows.push_back(std::move(r));
      } else {
        same->names.push_back(n.name);
      }
    }
  }
  static const std::map<char, std::string> kHeaders = {
      {'P', "PARTITION"},   {'R', "PARTITION"}, {'a', "AVAIL"}, {'l', "TIMELIMIT"},
      {'L', "DEFAULTTIME"}, {'D', "NODES"},     {'t', "STATE"}, {'T', "STATE"},
      {'N', "NODELIST"},    {'G', "GRES"},      {'c', "CPUS"},  {'m', "MEMORY"},
      {'E', "REASON"},      {'%', "%"}};
  auto line = [&](const std::function<std::string(size_t, const Field&)>& value) {
    std::string out;
    for (size_t i = 0; i < fields->size(); ++i) {
      const Field& f = (*fields)[i];
      out += f.literal + (f.name.empty() ? "" : slurm::Fit(value(i, f), f));
    }
    while (!out.empty() && out.back() == ' ') out.pop_back();
    std::printf("%s\n", out.c_str());
  };
  if (!a.Has("noheader")) {
    line([](size_t, const Field& f) {
      auto it = kHeaders.find(f.name[0]);
      return it == kHeaders.end() ? f.name : it->second;
    });
  }
  for (const Row& r : rows) {
    line([&](size_t i, const Field& f) {
      if (f.name == "N") return CompressHostList(r.names);
      if (f.name == "D") return std::to_string(r.names.size());
      return r.values[i];
    });
  }
  return 0;
}

// `sacctmgr -n -s list user NAME format=account%20` (Snakemake asks it for an account to pass
// to sbatch -A): the queues that NAME may submit to, else "default".
int Sacctmgr(ApiClient* api, const std::vector<std::string>& argv) {
  Args a;
  Status ok = a.Parse("sacctmgr", argv,
                      {{"n", "noheader", false},
                       {"s", "withassoc", false},
                       {"P", "parsable2", false},
                       {"p", "parsable", false},
                       {"i", "immediate", false}});
  if (!ok.ok()) return Fail("sacctmgr", ok);
  std::vector<std::string> words = a.positional();
  if (words.size() < 2 || (Lower(words[0]) != "list" && Lower(words[0]) != "show") ||
      (Lower(words[1]) != "user" && Lower(words[1]) != "account" &&
       Lower(words[1]) != "associations")) {
    return Fail("sacctmgr",
                Status::InvalidArgument(
                    "hangar's sacctmgr only lists: `sacctmgr list user NAME format=account`, "
                    "`sacctmgr list account`; accounts are Hangar's queues (hangar queues)"));
  }
  std::string user;
  for (size_t i = 2; i < words.size(); ++i) {
    if (words[i].find('=') == std::string::npos) user = words[i];
    if (Lower(words[i]).rfind("user=", 0) == 0 || Lower(words[i]).rfind("name=", 0) == 0)
      user = words[i].substr(5);
  }
  std::vector<std::string> accounts;
  if (auto q = api->Get("/v1/queues"); q.ok()) {
    for (const auto& r : q->value("queues", nlohmann::json::array())) {
      const auto users = r.value("users", std::vector<std::string>{});
      if (user.empty() || users.empty() ||
          std::find(users.begin(), users.end(), user) != users.end()) {
        accounts.push_back(r.value("name", ""));
      }
    }
  } else {
    return Fail("sacctmgr", q.status());
  }
  if (accounts.empty()) accounts = {"default"};
  if (!a.Has("noheader")) std::printf("%20s\n", "Account");
  if (!a.Has("noheader") && !a.Has("parsable2") && !a.Has("parsable"))
    std::printf("%s\n", std::string(20, '-').c_str());
  for (const auto& acc : accounts) {
    if (a.Has("parsable2") || a.Has("parsable")) {
      std::printf("%s%s\n", acc.c_str(), a.Has("parsable") ? "|" : "");
    } else {
      std::printf("%20s\n", acc.c_str());
    }
  }
  return 0;
}

}  // namespace hangar::cli::slurm
