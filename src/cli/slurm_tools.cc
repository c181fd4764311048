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
#include "cli/slurm_format.h"
#include "cli/squeue.h"
#include "common/time.h"

namespace hangar::cli {
namespace {

namespace fs = std::filesystem;
using slurm::Field;

Time WallNow() { return SystemClock::Default()->Now(); }

// 8, or 0.5: GPUs as Slurm's counts print them (fractions only where Hangar shares a GPU).
std::string FormatGpus(double g) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f", g);
  std::string s = buf;
  while (s.back() == '0') s.pop_back();
  if (s.back() == '.') s.pop_back();
  return s;
}

// Slurm's option forms: -j 7, -j7, --jobs=7, --jobs 7; flags stand alone (-P, --noheader).
struct Option {
  std::string short_name;  // "j" (or "")
  std::string long_name;   // "jobs"
  bool value = false;
};

class Args {
 public:
  // Parses `args` for `tool`; an option it does not know is an error naming those it knows.
  Status Parse(const std::string& tool, const std::vector<std::string>& args, const std::vector<Option>& known) {
    auto find = [&](const std::string& name, bool is_long) -> const Option* {
      for (const auto& o : known) {
        if ((is_long ? o.long_name : o.short_name) == name && !name.empty()) return &o;
      }
      return nullptr;
    };
    for (size_t i = 0; i < args.size(); ++i) {
      const std::string& a = args[i];
      if (a.size() < 2 || a[0] != '-') {
        positional_.push_back(a);
        continue;
      }
      const bool is_long = a[1] == '-';
      std::string name = is_long ? a.substr(2) : a.substr(1, 1);
      std::optional<std::string> inline_value;
      if (is_long && name.find('=') != std::string::npos) {
        inline_value = name.substr(name.find('=') + 1);
        name = name.substr(0, name.find('='));
      } else if (!is_long && a.size() > 2) {
        inline_value = a.substr(2);
      }
      const Option* o = find(name, is_long);
      if (o && !o->value && !is_long && inline_value) o = nullptr;  // -Pn: flags bundled
      if (!o) {
        // Flags bundled as Slurm allows them: -Pn.
        bool bundle = !is_long && inline_value;
        for (size_t k = 1; bundle && k < a.size(); ++k) {
          const Option* f = find(std::string(1, a[k]), false);
          bundle = f && !f->value;
        }
        if (bundle) {
          for (size_t k = 1; k < a.size(); ++k) Set(*find(std::string(1, a[k]), false), "");
          continue;
        }
        std::string names;
        for (const auto& k : known) names += (names.empty() ? "" : ", ") + (k.long_name.empty() ? "-" + k.short_name : "--" + k.long_name);
        return Status::InvalidArgument("option " + a + " is not one hangar's " + tool + " takes (it takes " + names +
                                       "; docs/slurm.md lists what differs from Slurm)");
      }
      if (!o->value) {
        Set(*o, "");
        continue;
      }
      if (!inline_value) {
        if (i + 1 >= args.size()) return Status::InvalidArgument("option " + a + " needs a value");
        inline_value = args[++i];
      }
      Set(*o, *inline_value);
    }
    return Status::Ok();
  }
  bool Has(const std::string& long_name) const { return values_.count(long_name) > 0; }
  std::string Get(const std::string& long_name, const std::string& fallback = "") const {
    auto it = values_.find(long_name);
    return it == values_.end() ? fallback : it->second;
  }
  const std::vector<std::string>& positional() const { return positional_; }

 private:
  void Set(const Option& o, const std::string& v) {
    const std::string key = o.long_name.empty() ? o.short_name : o.long_name;
    auto [it, fresh] = values_.emplace(key, v);
    if (!fresh && !v.empty()) it->second += "," + v;  // repeated list options add up
  }
  std::map<std::string, std::string> values_;
  std::vector<std::string> positional_;
};

std::vector<std::string> SplitCommas(const std::string& s) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= s.size()) {
    const size_t comma = std::min(s.find(',', start), s.size());
    if (comma > start) out.push_back(s.substr(start, comma - start));
    start = comma + 1;
  }
  return out;
}

std::string Lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// A job id as Slurm tools take it: 12, or 12_3 (an array element: its own id is looked up).
StatusOr<api::JobView> FetchJob(ApiClient* api, const std::string& id) {
  const size_t underscore = id.find('_');
  const std::string base = id.substr(0, underscore);
  if (base.empty() || base.size() > 19 || !std::all_of(base.begin(), base.end(), ::isdigit)) {
    return Status::InvalidArgument("'" + id + "' is not a job id (a number, or ARRAYID_INDEX)");
  }
  if (underscore == std::string::npos) {
    HANGAR_ASSIGN_OR_RETURN(auto j, api->Get("/v1/jobs/" + base));
    return api::JobViewFromJson(j);
  }
  const std::string index = id.substr(underscore + 1);
  HANGAR_ASSIGN_OR_RETURN(auto list, api->Get("/v1/jobs?array=" + base + "&limit=100000"));
  for (const auto& j : list.value("jobs", nlohmann::json::array())) {
    HANGAR_ASSIGN_OR_RETURN(api::JobView v, api::JobViewFromJson(j));
    if (std::to_string(v.array_index) == index) return v;
  }
  return Status::NotFound("array " + base + " has no element " + index);
}

// The jobs of a list query (each state given, or all), oldest first.
StatusOr<std::vector<api::JobView>> ListJobs(ApiClient* api, const std::string& query, const std::vector<std::string>& states) {
  std::vector<api::JobView> out;
  const std::vector<std::string> each = states.empty() ? std::vector<std::string>{""} : states;
  for (const std::string& state : each) {
    std::string q = "/v1/jobs?limit=100000" + query + (state.empty() ? "" : "&state=" + state);
    HANGAR_ASSIGN_OR_RETURN(auto list, api->Get(q));
    for (const auto& j : list.value("jobs", nlohmann::json::array())) {
      HANGAR_ASSIGN_OR_RETURN(api::JobView v, api::JobViewFromJson(j));
      out.push_back(std::move(v));
    }
  }
  std::sort(out.begin(), out.end(), [](const api::JobView& a, const api::JobView& b) { return a.id < b.id; });
  out.erase(std::unique(out.begin(), out.end(), [](const api::JobView& a, const api::JobView& b) { return a.id == b.id; }),
            out.end());
  return out;
}

// The jobs the -j/-u/-n/-t options select. `active_only`: squeue's default of the jobs not ended.
StatusOr<std::vector<api::JobView>> SelectJobs(ApiClient* api, const Args& a, bool active_only, const std::string& since) {
  std::vector<std::string> states;
  for (const std::string& t : SplitCommas(a.Get("states"))) {
    HANGAR_ASSIGN_OR_RETURN(auto s, slurm::HangarStates(t));
    if (s.empty()) active_only = false;  // "all"
    states.insert(states.end(), s.begin(), s.end());
  }
  if (states.empty() && active_only) states = {"pending", "starting", "running", "preempting"};
  std::vector<api::JobView> jobs;
  if (a.Has("jobs") && !a.Get("jobs").empty()) {
    for (const std::string& id : SplitCommas(a.Get("jobs"))) {
      auto j = FetchJob(api, id);
      if (!j.ok() && j.status().code() == StatusCode::kNotFound) continue;  // as Slurm: nothing printed
      if (!j.ok()) return j.status();
      jobs.push_back(std::move(*j));
    }
  } else {
    std::string query;
    if (!since.empty()) query += "&since=" + since;
    HANGAR_ASSIGN_OR_RETURN(jobs, ListJobs(api, query, states));
  }
  const std::vector<std::string> users = SplitCommas(a.Get("user")), names = SplitCommas(a.Get("name")),
                                 partitions = SplitCommas(a.Get("partition"));
  auto keep = [&](const api::JobView& j) {
    auto in = [](const std::vector<std::string>& list, const std::string& v) {
      return list.empty() || std::find(list.begin(), list.end(), v) != list.end();
    };
    const bool state_ok = states.empty() || std::find(states.begin(), states.end(), j.state) != states.end();
    return state_ok && in(users, j.user) && in(names, j.name) && in(partitions, j.queue);
  };
  std::erase_if(jobs, [&](const api::JobView& j) { return !keep(j); });
  return jobs;
}

std::string Elapsed(const api::JobView& j, Time now) {
  if (!j.started) return SlurmElapsed(0);
  return SlurmElapsed((j.ended ? j.ended : now) - j.started);
}

// squeue's %LETTER values.
std::string SqueueValue(const api::JobView& j, char letter, Time now) {
  const std::vector<std::string> nodes = slurm::JobNodes(j);
  switch (letter) {
    case 'i': return slurm::JobId(j);
    case 'A': return std::to_string(j.id);
    case 'F': return std::to_string(j.array_id ? j.array_id : j.id);
    case 'K': return j.array_index >= 0 ? std::to_string(j.array_index) : "N/A";
    case 'j': return j.name;
    case 'u': return j.user;
    case 'P': case 'a': return j.queue;
    case 't': return SlurmStateLetters(j.state);
    case 'T': return slurm::JobState(j);
    case 'M': return Elapsed(j, now);
    case 'l': return slurm::TimeLimit(j);
    case 'D': return std::to_string(nodes.empty() ? std::max(1, j.tasks) : static_cast<int>(nodes.size()));
    case 'N': return CompressHostList(nodes);
    case 'R': return j.state == "pending" ? "(" + (j.reason.empty() ? std::string("None") : j.reason) + ")" : CompressHostList(nodes);
    case 'r': return j.reason.empty() ? "None" : j.reason;
    case 'V': return slurm::Timestamp(j.submitted, "N/A");
    case 'S': return slurm::Timestamp(j.started, "N/A");
    case 'e': return slurm::Timestamp(j.ended, "N/A");
    case 'q': return j.tier;
    case 'Q': return std::to_string(j.priority);
    case 'b': return "gpu:" + FormatGpus(j.gpus);
    case '%': return "%";
    default: return "";
  }
}

int Fail(const std::string& tool, const Status& s) {
  std::fprintf(stderr, "%s: error: %s\n", tool.c_str(), s.message().c_str());
  return 1;
}

int Squeue(ApiClient* api, const std::vector<std::string>& argv) {
  Args a;
  Status ok = a.Parse("squeue", argv, {{"j", "jobs", true}, {"u", "user", true}, {"n", "name", true}, {"t", "states", true},
                                       {"p", "partition", true}, {"o", "format", true}, {"h", "noheader", false},
                                       {"", "me", false}, {"a", "all", false}, {"l", "long", false}, {"r", "array", false},
                                       {"i", "iterate", true}, {"", "sort", true}, {"S", "sort", true}});
  if (!ok.ok()) return Fail("squeue", ok);
  if (a.Has("iterate")) return Fail("squeue", Status::InvalidArgument("--iterate is not supported; use `watch squeue`"));
  const std::string format = a.Get("format", a.Has("long") ? "%.18i %.9P %.8j %.8u %.8T %.10M %.9l %.6D %R"
                                                           : "%.18i %.9P %.8j %.8u %.2t %.10M %.6D %R");
  auto fields = slurm::ParseSqueueFormat(format);
  if (!fields.ok()) return Fail("squeue", fields.status());
  auto jobs = SelectJobs(api, a, true, "");
  if (!jobs.ok()) return Fail("squeue", jobs.status());
  static const std::map<char, std::string> kHeaders = {
      {'i', "JOBID"}, {'A', "JOBID"}, {'F', "ARRAY_JOB_ID"}, {'K', "ARRAY_TASK_ID"}, {'j', "NAME"}, {'u', "USER"},
      {'P', "PARTITION"}, {'a', "ACCOUNT"}, {'t', "ST"}, {'T', "STATE"}, {'M', "TIME"}, {'l', "TIME_LIMIT"},
      {'D', "NODES"}, {'N', "NODELIST"}, {'R', "NODELIST(REASON)"}, {'r', "REASON"}, {'V', "SUBMIT_TIME"},
      {'S', "START_TIME"}, {'e', "END_TIME"}, {'q', "QOS"}, {'Q', "PRIORITY"}, {'b', "TRES_PER_NODE"}, {'%', "%"}};
  const Time now = WallNow();
  auto line = [&](const std::function<std::string(const Field&)>& value) {
    std::string out;
    for (const Field& f : *fields) out += f.literal + (f.name.empty() ? "" : slurm::Fit(value(f), f));
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
  if (f == "partition" || f == "account") return j.queue;
  if (f == "user") return j.user;
  if (f == "state") return slurm::JobState(j);
  if (f == "exitcode") return slurm::ExitCode(j);
  if (f == "elapsed") return Elapsed(j, now);
  if (f == "elapsedraw") return std::to_string(j.started ? ((j.ended ? j.ended : now) - j.started) / kSecond : 0);
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

int Sacct(ApiClient* api, const std::vector<std::string>& argv) {
  Args a;
  Status ok = a.Parse("sacct", argv, {{"j", "jobs", true}, {"u", "user", true}, {"", "name", true}, {"s", "states", true},
                                      {"r", "partition", true}, {"o", "format", true}, {"n", "noheader", false},
                                      {"P", "parsable2", false}, {"p", "parsable", false}, {"X", "allocations", false},
                                      {"S", "starttime", true}, {"a", "allusers", false}, {"b", "brief", false},
                                      {"l", "long", false}, {"A", "accounts", true}});
  if (!ok.ok()) return Fail("sacct", ok);
  std::string format = a.Get("format", "JobID%12,JobName,Partition,Account,State,ExitCode%8");
  if (a.Has("brief")) format = "JobID%12,State,ExitCode%8";
  auto fields = slurm::ParseSacctFormat(format);
  if (!fields.ok()) return Fail("sacct", fields.status());
  const Time now = WallNow();
  for (const Field& f : *fields) {
    api::JobView probe;
    if (!SacctValue(probe, f.name, now)) {
      return Fail("sacct", Status::InvalidArgument(
                               "--format field '" + f.name +
                               "' is not one hangar's sacct has: JobID, JobIDRaw, JobName, Partition, Account, User, "
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
    if (!f.width) f.width = n == "jobid" || n == "jobidraw" ? 12 : n == "exitcode" ? 8 : n == "nodelist" ? 15
                          : n == "submit" || n == "start" || n == "end" ? 19 : 10;
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
    if (!parsable) line([](const Field& f) { return std::string(static_cast<size_t>(f.width), '-'); });
  }
  for (const auto& j : *jobs) line([&](const Field& f) { return *SacctValue(j, f.name, now); });
  return 0;
}

void PrintJob(const api::JobView& j, bool one_line) {
  const std::vector<std::string> nodes = slurm::JobNodes(j);
  const Time now = WallNow();
  std::vector<std::vector<std::string>> groups = {
      {"JobId=" + std::to_string(j.id), "JobName=" + j.name},
      {"UserId=" + j.user, "Account=" + j.queue, "QOS=" + j.tier, "Priority=" + std::to_string(j.priority)},
      {"JobState=" + slurm::JobState(j), "Reason=" + (j.state == "pending" && !j.reason.empty() ? j.reason : "None"),
       "Dependency=(null)"},
      {"Requeue=1", "Restarts=" + std::to_string(j.restarts), "ExitCode=" + slurm::ExitCode(j)},
      {"RunTime=" + Elapsed(j, now), "TimeLimit=" + slurm::TimeLimit(j)},
      {"SubmitTime=" + slurm::Timestamp(j.submitted), "StartTime=" + slurm::Timestamp(j.started),
       "EndTime=" + slurm::Timestamp(j.ended)},
      {"Partition=" + j.queue, "NodeList=" + (nodes.empty() ? "(null)" : CompressHostList(nodes))},
      {"NumNodes=" + std::to_string(nodes.empty() ? 1 : nodes.size()), "NumTasks=" + std::to_string(j.tasks)},
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
      "NodeName=" + n.name, "State=" + slurm::NodeState(n, false), "Gres=gpu:" + n.model + ":" + std::to_string(n.gpus),
      "GresUsed=gpu:" + FormatGpus(n.gpus - n.gpus_free), "CPUTot=" + std::to_string(n.milli_cpu / 1000),
      "RealMemory=" + std::to_string(n.memory_mib), "FreeMem=" + std::to_string(n.memory_mib_free),
      "Reason=" + (n.reason.empty() ? std::string("(null)") : n.reason)};
  std::string out;
  for (size_t i = 0; i < kv.size(); ++i) out += (i ? (one_line ? " " : "\n   ") : "") + kv[i];
  std::printf("%s\n%s", out.c_str(), one_line ? "" : "\n");
}

int Scontrol(ApiClient* api, const std::vector<std::string>& argv) {
  Args a;
  Status ok = a.Parse("scontrol", argv, {{"d", "details", false}, {"o", "oneliner", false}, {"Q", "quiet", false}});
  if (!ok.ok()) return Fail("scontrol", ok);
  std::vector<std::string> words = a.positional();
  if (words.empty()) {
    return Fail("scontrol", Status::InvalidArgument("say what to do: show hostnames|job|node, hold|release|requeue JOBID"));
  }
  const std::string verb = Lower(words[0]);
  if (verb == "show" && words.size() >= 2) {
    const std::string what = Lower(words[1]);
    const std::string arg = words.size() >= 3 ? words[2] : "";
    if (what == "hostnames" || what == "hostname") {
      std::string list = arg;
      if (list.empty() && std::getenv("SLURM_JOB_NODELIST")) list = std::getenv("SLURM_JOB_NODELIST");
      if (list.empty()) {
        return Fail("scontrol", Status::InvalidArgument("no host list given and SLURM_JOB_NODELIST is not set"));
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
          return Fail("scontrol", Status::NotFound("Invalid job id specified (job " + arg + " does not exist)"));
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
      const nlohmann::json rows = arg.empty() ? list->value("nodes", nlohmann::json::array()) : nlohmann::json::array({*list});
      for (const auto& r : rows) {
        auto n = api::NodeViewFromJson(r);
        if (n.ok()) PrintNode(*n, a.Has("oneliner"));
      }
      return 0;
    }
  }
  if ((verb == "hold" || verb == "release" || verb == "requeue" || verb == "uhold") && words.size() >= 2) {
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
    return Fail("scontrol", Status::InvalidArgument(
                                "hangar cannot change a submitted job (" + (words.size() > 1 ? words[1] : "") +
                                "): cancel it and submit it again with the new values, or `hangar hold` it first"));
  }
  return Fail("scontrol", Status::InvalidArgument("'" + words[0] + (words.size() > 1 ? " " + words[1] : "") +
                                                  "' is not one hangar's scontrol does: show hostnames|hostname|job|"
                                                  "node, hold, release, requeue"));
}

int Scancel(ApiClient* api, const std::vector<std::string>& argv) {
  Args a;
  Status ok = a.Parse("scancel", argv, {{"u", "user", true}, {"n", "name", true}, {"t", "state", true},
                                        {"p", "partition", true}, {"s", "signal", true}, {"b", "batch", false},
                                        {"f", "full", false}, {"q", "quiet", false}, {"v", "verbose", false},
                                        {"i", "interactive", false}, {"", "me", false}});
  if (!ok.ok()) return Fail("scancel", ok);
  const std::string sig = a.Get("signal");
  if (!sig.empty() && sig != "TERM" && sig != "SIGTERM" && sig != "KILL" && sig != "SIGKILL" && sig != "15" && sig != "9") {
    return Fail("scancel", Status::InvalidArgument("--signal=" + sig +
                                                   " is not sent here: hangar signals a job only to stop it (TERM or KILL "
                                                   "cancel it); a job's checkpoint signal goes out when it is preempted"));
  }
  int rc = 0;
  for (const std::string& id : a.positional()) {
    auto j = FetchJob(api, id);
    if (!j.ok()) {
      std::fprintf(stderr, "scancel: error: Kill job error on job id %s: %s\n", id.c_str(), j.status().message().c_str());
      rc = 1;
      continue;
    }
    // ARRAYID alone is the whole array, as in Slurm.
    const bool whole_array = id.find('_') == std::string::npos && j->array_id == j->id;
    nlohmann::json body = whole_array ? nlohmann::json{{"array", j->id}} : nlohmann::json{{"ids", {j->id}}};
    auto r = api->Post("/v1/jobs/bulk/cancel", body.dump());
    if (!r.ok()) {
      std::fprintf(stderr, "scancel: error: Kill job error on job id %s: %s\n", id.c_str(), r.status().message().c_str());
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
    if (body.empty()) return Fail("scancel", Status::InvalidArgument("no job id given; name ids, or select with -u, -n, -p or -t"));
    auto r = api->Post("/v1/jobs/bulk/cancel", body.dump());
    if (!r.ok()) return Fail("scancel", r.status());
  }
  return rc;
}

int Sinfo(ApiClient* api, const std::vector<std::string>& argv) {
  Args a;
  Status ok = a.Parse("sinfo", argv, {{"N", "Node", false}, {"h", "noheader", false}, {"p", "partition", true},
                                      {"s", "summarize", false}, {"l", "long", false}, {"a", "all", false},
                                      {"r", "responding", false}, {"R", "list-reasons", false}});
  if (!ok.ok()) return Fail("sinfo", ok);
  auto list = api->Get("/v1/nodes");
  if (!list.ok()) return Fail("sinfo", list.status());
  std::vector<api::NodeView> nodes;
  for (const auto& r : list->value("nodes", nlohmann::json::array())) {
    auto n = api::NodeViewFromJson(r);
    if (n.ok()) nodes.push_back(*n);
  }
  std::vector<std::string> partitions;
  if (auto q = api->Get("/v1/queues"); q.ok()) {
    for (const auto& r : q->value("queues", nlohmann::json::array())) partitions.push_back(r.value("name", ""));
  }
  if (partitions.empty()) partitions = {"default"};
  if (a.Has("partition")) partitions = SplitCommas(a.Get("partition"));
  if (a.Has("Node")) {
    if (!a.Has("noheader")) std::printf("%-15s %5s %-9s %-5s\n", "NODELIST", "NODES", "PARTITION", "STATE");
    for (const auto& n : nodes) {
      for (size_t p = 0; p < partitions.size(); ++p) {
        std::printf("%-15s %5d %-9s %-5s\n", n.name.c_str(), 1, (partitions[p] + (p == 0 ? "*" : "")).c_str(),
                    slurm::NodeState(n, true).c_str());
      }
    }
    return 0;
  }
  // One row per partition and state, as Slurm groups them.
  if (!a.Has("noheader")) std::printf("%-9s %5s %10s %5s %-5s %s\n", "PARTITION", "AVAIL", "TIMELIMIT", "NODES", "STATE", "NODELIST");
  for (size_t p = 0; p < partitions.size(); ++p) {
    std::map<std::string, std::vector<std::string>> by_state;
    for (const auto& n : nodes) by_state[slurm::NodeState(n, true)].push_back(n.name);
    for (const auto& [state, names] : by_state) {
      std::printf("%-9s %5s %10s %5zu %-5s %s\n", (partitions[p] + (p == 0 ? "*" : "")).c_str(), "up", "infinite",
                  names.size(), state.c_str(), CompressHostList(names).c_str());
    }
  }
  return 0;
}

// `sacctmgr -n -s list user NAME format=account%20` (Snakemake asks it for an account to pass
// to sbatch -A): the queues that NAME may submit to, else "default".
int Sacctmgr(ApiClient* api, const std::vector<std::string>& argv) {
  Args a;
  Status ok = a.Parse("sacctmgr", argv, {{"n", "noheader", false}, {"s", "withassoc", false}, {"P", "parsable2", false},
                                         {"p", "parsable", false}, {"i", "immediate", false}});
  if (!ok.ok()) return Fail("sacctmgr", ok);
  std::vector<std::string> words = a.positional();
  if (words.size() < 2 || (Lower(words[0]) != "list" && Lower(words[0]) != "show") ||
      (Lower(words[1]) != "user" && Lower(words[1]) != "account" && Lower(words[1]) != "associations")) {
    return Fail("sacctmgr", Status::InvalidArgument("hangar's sacctmgr only lists: `sacctmgr list user NAME format=account`, "
                                                    "`sacctmgr list account`; accounts are Hangar's queues (hangar queues)"));
  }
  std::string user;
  for (size_t i = 2; i < words.size(); ++i) {
    if (words[i].find('=') == std::string::npos) user = words[i];
    if (Lower(words[i]).rfind("user=", 0) == 0 || Lower(words[i]).rfind("name=", 0) == 0) user = words[i].substr(5);
  }
  std::vector<std::string> accounts;
  if (auto q = api->Get("/v1/queues"); q.ok()) {
    for (const auto& r : q->value("queues", nlohmann::json::array())) {
      const auto users = r.value("users", std::vector<std::string>{});
      if (user.empty() || users.empty() || std::find(users.begin(), users.end(), user) != users.end()) {
        accounts.push_back(r.value("name", ""));
      }
    }
  } else {
    return Fail("sacctmgr", q.status());
  }
  if (accounts.empty()) accounts = {"default"};
  if (!a.Has("noheader")) std::printf("%20s\n", "Account");
  if (!a.Has("noheader") && !a.Has("parsable2") && !a.Has("parsable")) std::printf("%s\n", std::string(20, '-').c_str());
  for (const auto& acc : accounts) {
    if (a.Has("parsable2") || a.Has("parsable")) {
      std::printf("%s%s\n", acc.c_str(), a.Has("parsable") ? "|" : "");
    } else {
      std::printf("%20s\n", acc.c_str());
    }
  }
  return 0;
}

const char* const kTools[] = {"squeue", "sacct", "scontrol", "scancel", "sinfo", "sacctmgr"};

}  // namespace

int RunSlurmTool(const std::string& tool, const std::vector<std::string>& args, const std::string& server) {
  ApiClient api(server);
  if (tool == "squeue") return Squeue(&api, args);
  if (tool == "sacct") return Sacct(&api, args);
  if (tool == "scontrol") return Scontrol(&api, args);
  if (tool == "scancel") return Scancel(&api, args);
  if (tool == "sinfo") return Sinfo(&api, args);
  if (tool == "sacctmgr") return Sacctmgr(&api, args);
  if (tool == "srun") {
    return Fail("srun", Status::FailedPrecondition("srun launches steps inside a job: put it in a batch script and "
                                                   "submit that with sbatch (hangar sbatch)"));
  }
  if (tool == "salloc") {
    return Fail("salloc", Status::FailedPrecondition("interactive allocations are not in this Hangar yet: submit a "
                                                     "batch script with sbatch (hangar sbatch) instead"));
  }
  return Fail(tool, Status::InvalidArgument("not a Slurm command hangar has: squeue, sacct, scontrol, scancel, sinfo, "
                                            "sacctmgr (and sbatch: hangar sbatch)"));
}

std::vector<std::string> InstallSlurmCommands(const std::string& dir, const std::string& hangar_binary,
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
      out << "#!/bin/sh\n# Slurm's " << name << " over Hangar's API (hangar slurm install; docs/slurm.md).\nexec "
          << quoted << " " << sub << " \"$@\"\n";
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
  auto* c = app.add_subcommand("slurm", "Slurm's client commands over Hangar's API: hangar slurm squeue|sacct|scontrol|"
                                        "scancel|sinfo|sacctmgr ARGS (Slurm's arguments and formats), or hangar slurm "
                                        "install DIR (writes them as commands of those names; docs/slurm.md)");
  c->prefix_command();
  c->callback([c, rc] {
    std::vector<std::string> args = c->remaining();
    if (args.empty()) {
      std::fprintf(stderr, "error: name a Slurm command: hangar slurm squeue|sacct|scontrol|scancel|sinfo|sacctmgr ARGS, "
                           "or hangar slurm install DIR\n");
      *rc = 2;
      return;
    }
    const std::string tool = args.front();
    args.erase(args.begin());
    if (tool == "install") {
      if (args.size() != 1) {
        std::fprintf(stderr, "error: hangar slurm install DIR: name the folder to write the commands into\n");
        *rc = 2;
        return;
      }
      std::error_code ec;
      const std::string self = fs::read_symlink("/proc/self/exe", ec).string();
      std::string error;
      const auto names = InstallSlurmCommands(args[0], self, &error);
      if (!error.empty()) {
        std::fprintf(stderr, "error: %s\n", error.c_str());
        *rc = 1;
        return;
      }
      std::string list;
      for (const auto& n : names) list += (list.empty() ? "" : " ") + n;
      std::printf("wrote %s into %s; put it first on PATH only where no real Slurm is wanted: "
                  "export PATH=%s:$PATH\n", list.c_str(), args[0].c_str(), args[0].c_str());
      return;
    }
    *rc = RunSlurmTool(tool, args, "");
  });
}

}  // namespace hangar::cli
