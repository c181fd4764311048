#include "cli/sbatch.h"

#include <unistd.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <limits>
#include <map>
#include <set>

#include "cli/sbatch_nodes.h"
#include "cli/sbatch_shape.h"
#include "cli/sbatch_wrapper.h"
#include "common/units.h"
#include "job/job_spec.h"

namespace hangar::cli::sbatch {

namespace {

// A job's text travels in one argument of its command; Linux allows 128 KiB per argument.
constexpr size_t kMaxScriptBytes = 64 * 1024;

// Slurm's KillWait: how long a job has between SIGTERM and SIGKILL at its time limit. Used as the
// checkpoint grace when the script gives no --signal.
constexpr Duration kSlurmKillWait = 30 * kSecond;

Status Err(const std::string& what) { return Status::InvalidArgument(what); }

// "1d2h3m4s" exactly (ParseDuration reads it back), "0s" for zero.
std::string ExactDuration(Duration d) {
  std::string out;
  const std::pair<Duration, const char*> units[] = {
      {kDay, "d"}, {kHour, "h"}, {kMinute, "m"}, {kSecond, "s"}};
  for (auto [unit, name] : units) {
    if (d >= unit) out += std::to_string(d / unit) + name, d %= unit;
  }
  if (d > 0) out += std::to_string(d) + "ms";
  return out.empty() ? "0s" : out;
}

// A signal as `trap` names it: USR1, or its number.
std::string TrapName(int sig) {
  const std::string n = job::SignalName(sig);
  return n.rfind("SIG", 0) == 0 ? n.substr(3) : n;
}

// The job's name: --job-name, else the script's file name, as sbatch; made into a Hangar name
// (1-63 letters, digits, '.', '_' or '-'), with a warning when that changes it.
std::string JobName(const SbatchOptions& o, const std::string& script_name, Diagnostics* d) {
  std::string name =
      o.job_name ? *o.job_name : std::filesystem::path(script_name).filename().string();
  const std::string asked = name;
  for (char& c : name) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '_' && c != '-') c = '-';
  }
  if (name.empty() || !std::isalnum(static_cast<unsigned char>(name[0]))) name = "sbatch" + name;
  name = name.substr(0, 63);
  if (o.job_name && name != asked) {
    d->warnings.push_back(WhereSet(o, "job-name") + ": --job-name: the job is named '" + name +
                          "': a Hangar job name has 1-63 letters, digits, '.', '_' or '-', "
                          "starting with a letter or digit");
  }
  return name;
}

// Timing: Slurm warns --signal's seconds before the end and kills at --time; Hangar signals at
// time_limit and kills after the grace. So time_limit = --time - warning, grace = warning: the
// signal and the kill come when Slurm's would.
void AddTiming(const SbatchOptions& o, nlohmann::ordered_json* j, Diagnostics* d) {
  const Duration warning = o.signal ? o.signal->before_end : kSlurmKillWait;
  if (o.time && *o.time > 0) {
    if (o.signal && *o.time <= warning) {
      d->errors.push_back(WhereSet(o, "signal") + ": --signal's warning (" +
                          ExactDuration(warning) + " before the end) is not shorter than --time (" +
                          ExactDuration(*o.time) + ", " + WhereSet(o, "time") +
                          "); give a shorter warning or a longer time");
    } else {
      (*j)["time_limit"] = ExactDuration(o.signal ? *o.time - warning : *o.time);
    }
  }
  const int sig = o.signal ? o.signal->signal : SIGTERM;
  (*j)["checkpoint"] = {{"signal", job::SignalName(sig)}, {"grace", ExactDuration(warning)}};
}

// A QoS is site policy: one hangar sbatch does not map changes only how soon the job runs, so it
// is a warning, not a refusal.
void AddPolicy(const SbatchOptions& o, nlohmann::ordered_json* j, Diagnostics* d) {
  if (o.partition) (*j)["queue"] = *o.partition;
  if (o.reservation) (*j)["reservation"] = *o.reservation;
  if (o.account) (*j)["account"] = *o.account;  // the accounting label (hangar history, sacct)
  int priority = 0;
  std::string tier;
  if (o.qos) {
    auto q = MapQos(*o.qos);
    if (q.ok()) {
      priority = q->priority;
      tier = q->tier;
    } else {
      d->warnings.push_back(WhereSet(o, "qos") + ": --qos=" + *o.qos +
                            " is set aside: " + q.status().message());
    }
  }
  if (o.nice) priority -= *o.nice;
  if (priority) (*j)["priority"] = priority;
  if (!tier.empty()) (*j)["tier"] = tier;
  if (o.array) (*j)["array"] = *o.array;
  if (o.dependency &&
      (!o.dependency->ok.empty() || !o.dependency->any.empty() || !o.dependency->notok.empty())) {
    nlohmann::ordered_json after = nlohmann::ordered_json::object();
    if (!o.dependency->ok.empty()) after["ok"] = o.dependency->ok;
    if (!o.dependency->any.empty()) after["any"] = o.dependency->any;
    if (!o.dependency->notok.empty()) after["notok"] = o.dependency->notok;
    (*j)["after"] = after;
  }
}

// The variables a Slurm batch script reads that are known at submission; the wrapper adds the
// ones only the running task knows (SLURM_JOB_ID, SLURM_NODEID, SLURM_ARRAY_TASK_ID, ...).
nlohmann::ordered_json StaticEnv(const SbatchOptions& o, const Shape& s, const std::string& name,
                                 const Submission& sub) {
  const std::string& submit_dir = sub.submit_dir;
  nlohmann::ordered_json env = nlohmann::ordered_json::object();
  env["SLURM_JOB_NAME"] = name;
  env["SLURM_JOB_NUM_NODES"] = env["SLURM_NNODES"] = std::to_string(s.nodes);
  // As Slurm: the task count only when the script asked tasks, the count per node only when it
  // asked that (srun reads SLURM_TASKS_PER_NODE otherwise).
  if (o.ntasks || o.ntasks_per_node || o.ntasks_per_gpu)
    env["SLURM_NTASKS"] = env["SLURM_NPROCS"] = std::to_string(s.nodes * s.tasks_per_node);
  if (o.ntasks_per_node) env["SLURM_NTASKS_PER_NODE"] = std::to_string(s.tasks_per_node);
  // Slurm's compressed form: "2(x3)" is 2 tasks on each of 3 nodes (Hangar's nodes are equal).
  env["SLURM_TASKS_PER_NODE"] =
      std::to_string(s.tasks_per_node) + (s.nodes > 1 ? "(x" + std::to_string(s.nodes) + ")" : "");
  if (o.cpus_per_task) env["SLURM_CPUS_PER_TASK"] = std::to_string(*o.cpus_per_task);
  if (s.gpus) env["SLURM_GPUS_ON_NODE"] = std::to_string(s.gpus);
  // srun binds each step task to this many of its node's GPUs (docs/slurm.md), as Slurm does.
  if (o.gpus_per_task) env["SLURM_GPUS_PER_TASK"] = std::to_string(*o.gpus_per_task);
  env["SLURM_JOB_PARTITION"] = o.partition.value_or("default");
  env["SLURM_SUBMIT_DIR"] = submit_dir;
  if (o.account) env["SLURM_JOB_ACCOUNT"] = *o.account;
  if (o.array) {
    auto spec = ParseArraySpec(*o.array);  // checked when read
    if (spec.ok() && !spec->indices.empty()) {
      env["SLURM_ARRAY_TASK_COUNT"] = std::to_string(spec->indices.size());
      env["SLURM_ARRAY_TASK_MIN"] = std::to_string(spec->indices.front());
      env["SLURM_ARRAY_TASK_MAX"] = std::to_string(spec->indices.back());
    }
  }
  for (const auto& name : o.export_names) {  // as sbatch: only what the submitter has set
    if (auto it = sub.environment.find(name); it != sub.environment.end()) env[name] = it->second;
  }
  for (const auto& [k, v] : o.export_env) env[k] = v;
  return env;
}

std::string Redirect(const SbatchOptions& o, const std::string& name, bool append, Diagnostics* d) {
  const std::string default_out = o.array ? "slurm-%A_%a.out" : "slurm-%j.out";
  auto out = OutputPatternToShell(o.output.value_or(default_out), name);
  if (!out.ok())
    d->errors.push_back(WhereSet(o, "output") + ": --output=" + o.output.value_or("") + ": " +
                        out.status().message());
  const std::string op = append ? ">>" : ">";
  if (!o.error || o.error == o.output) return op + " " + (out.ok() ? *out : "") + " 2>&1";
  auto err = OutputPatternToShell(*o.error, name);
  if (!err.ok())
    d->errors.push_back(WhereSet(o, "error") + ": --error=" + *o.error + ": " +
                        err.status().message());
  return op + " " + (out.ok() ? *out : "") + " 2" + op + " " + (err.ok() ? *err : "");
}

// A script is carried into the job as written, and a job's command holds no control character
// but tab and newline: refuse any other here, with its line, as sbatch refuses DOS line breaks.
Status CheckScriptText(const std::string& text, const std::string& name) {
  int line = 1;
  for (unsigned char c : text) {
    if (c == '\n') {
      ++line;
    } else if (c == '\r') {
      return Err(
          name + ":" + std::to_string(line) +
          ": the script has DOS line breaks (\\r\\n), which sbatch refuses too: convert it with "
          "dos2unix and submit it again");
    } else if ((c < 0x20 && c != '\t') || c == 0x7f) {
      char hex[8];
      std::snprintf(hex, sizeof hex, "0x%02x", c);
      return Err(name + ":" + std::to_string(line) + ": the script holds a control character (" +
                 hex + "); a job's command may hold only tab and newline: remove it");
    }
  }
  return Status::Ok();
}

// What a heterogeneous job's component resets rather than takes from the one before it (Slurm's
// heterogeneous_jobs.html: the resources; the job-wide options propagate).
const std::set<std::string> kPerComponent = {"nodes",         "ntasks",        "ntasks-per-node",
                                             "gpus-per-node", "gpus-per-task", "cpus-per-task",
                                             "cpus-per-gpu",  "gpus",          "ntasks-per-gpu",
                                             "gpu-type",      "mem",           "mem-per-gpu",
                                             "mem-per-cpu",   "exclusive",     "constraint",
                                             "nodelist",      "gres"};

// The next component's start: the one before it, less its resources.
SbatchOptions Propagated(const SbatchOptions& before) {
  SbatchOptions o = before;
  o.nodes = o.ntasks = o.ntasks_per_node = o.gpus_per_node = o.gpus_per_task = o.cpus_per_task =
      o.cpus_per_gpu = o.gpus_total = o.ntasks_per_gpu = std::nullopt;
  o.gpu_type.clear();
  o.mem_mib = o.mem_per_gpu_mib = o.mem_per_cpu_mib = std::nullopt;
  o.mem_whole_node = o.exclusive = false;
  o.constraint = o.nodelist = std::nullopt;
  o.warnings.clear();
  for (const auto& name : kPerComponent) o.where.erase(name);
  return o;
}

// The script's and the command line's options, one SbatchOptions per component of a
// heterogeneous job (one without `#SBATCH hetjob`; the command line's go to the first); what
// cannot be read or applied goes to `d`, and reading goes on, so that every problem is reported
// at once.
StatusOr<std::vector<SbatchOptions>> ReadOptions(const Submission& s, Diagnostics* d) {
  if (s.script_text.rfind("#!", 0) != 0) {
    return Err(
        s.script_name +
        ":1: a batch script starts with #! and its interpreter (e.g. #!/bin/bash), as sbatch "
        "requires");
  }
  if (s.script_text.size() > kMaxScriptBytes) {
    return Err(s.script_name + ": the script is " + std::to_string(s.script_text.size()) +
               " bytes; hangar sbatch carries at most " + std::to_string(kMaxScriptBytes) +
               " in the job: move the work into a file the script runs");
  }
  HANGAR_RETURN_IF_ERROR(CheckScriptText(s.script_text, s.script_name));
  std::vector<std::vector<Directive>> parts(1);
  for (Directive& line : ReadDirectives(s.script_text, s.script_name, d)) {
    if (line.name == kHetjob) {
      parts.emplace_back();
      continue;
    }
    parts.back().push_back(std::move(line));
  }
  auto command_line = ReadCommandLine(s.command_line);
  if (!command_line.ok()) return command_line.status();
  // The command line wins, over the first component's lines.
  parts[0].insert(parts[0].end(), command_line->begin(), command_line->end());
  std::vector<SbatchOptions> components;
  std::map<std::string, std::string> first_values;  // the first component's job-wide values
  for (const auto& line : parts[0]) first_values[line.name] = line.value.value_or("");
  for (size_t c = 0; c < parts.size(); ++c) {
    SbatchOptions o = c == 0 ? SbatchOptions{} : Propagated(components.back());
    for (const auto& line : parts[c]) {
      if (Status st = ApplyDirective(line, s.script_name, &o); !st.ok()) {
        d->errors.push_back(st.message());
        continue;
      }
      // One job here: its time, name, output, queue, ... are the first component's.
      auto first = first_values.find(line.name);
      if (c > 0 && !kPerComponent.count(line.name) &&
          (first == first_values.end() || first->second != line.value.value_or(""))) {
        d->warnings.push_back(WhereOf(line, s.script_name) + ": " + line.text +
                              " is set aside: Hangar runs a heterogeneous job's components as "
                              "one job, whose job-wide options are the first component's");
      }
    }
    d->warnings.insert(d->warnings.end(), o.warnings.begin(), o.warnings.end());
    components.push_back(std::move(o));
  }
  if (components.size() > 1 && components[0].array) {
    d->errors.push_back(WhereSet(components[0], "array") +
                        ": --array with #SBATCH hetjob: a heterogeneous job cannot be an array "
                        "(Slurm refuses it too); submit the components as one job per index");
  }
  return components;
}

std::string Workdir(const SbatchOptions& o, const std::string& submit_dir) {
  if (!o.chdir) return submit_dir;
  if (!o.chdir->empty() && o.chdir->front() == '/') return *o.chdir;
  std::string dir = (std::filesystem::path(submit_dir) / *o.chdir).lexically_normal().string();
  if (dir.size() > 1 && dir.back() == '/') dir.pop_back();
  return dir;
}

}  // namespace

StatusOr<QosMapping> MapQos(const std::string& qos) {
  if (qos == "normal") return QosMapping{"guaranteed", 0};
  if (qos == "high") return QosMapping{"guaranteed", 100};
  if (qos == "low") return QosMapping{"guaranteed", -100};
  for (const char* preemptible : {"scavenger", "standby", "preemptible", "opportunistic", "spot"}) {
    if (qos == preemptible) return QosMapping{"opportunistic", 0};
  }
  return Err(
      "hangar sbatch maps the QoS normal, high (priority 100), low (priority -100) and scavenger, "
      "standby, "
      "preemptible, opportunistic or spot (tier opportunistic); for others give --partition and "
      "edit the job "
      "file from --dry-run");
}

// The script's problems in the order of its lines (a stage that checks the whole script finds its
// problems after the directives are read); the command line's come last.
void SortByLine(std::vector<std::string>* lines, const std::string& file) {
  auto line_of = [&](const std::string& m) -> long {
    if (m.rfind(file + ":", 0) != 0) return std::numeric_limits<long>::max();
    return std::strtol(m.c_str() + file.size() + 1, nullptr, 10);
  };
  std::stable_sort(lines->begin(), lines->end(), [&](const std::string& a, const std::string& b) {
    return line_of(a) < line_of(b);
  });
}

namespace {

// Slurm's variables a heterogeneous job's script sees for each component n, with the suffix
// _HET_GROUP_n (its own, unsuffixed, are the first component's).
const char* const kPerComponentEnv[] = {
    "SLURM_NNODES",          "SLURM_JOB_NUM_NODES",  "SLURM_NTASKS",        "SLURM_NPROCS",
    "SLURM_NTASKS_PER_NODE", "SLURM_TASKS_PER_NODE", "SLURM_CPUS_PER_TASK", "SLURM_GPUS_ON_NODE",
    "SLURM_GPUS_PER_TASK",   "SLURM_JOB_PARTITION"};

// The task groups of a heterogeneous job: "batch" (the script's) and het-1, het-2, ...
std::string GroupName(size_t component) {
  return component == 0 ? "batch" : "het-" + std::to_string(component);
}

}  // namespace

namespace {

// `begin:` (an absolute time in the job file, so that --dry-run shows when) and `hold:` (held
// from the start: `hangar release ID`, scontrol release).
void AddBeginAndHold(const SbatchOptions& o, Time now, nlohmann::ordered_json* j, Diagnostics* d) {
  if (o.begin) {
    auto at = ParseSlurmBegin(*o.begin, now);
    if (at.ok())
      (*j)["begin"] = FormatUtcTimestamp(std::max<Time>(*at, 0));
    else
      d->errors.push_back(WhereSet(o, "begin") + ": --begin=" + *o.begin + ": " +
                          at.status().message());
  }
  if (o.hold) (*j)["hold"] = true;
}

// A later component's --nodelist is refused: the job's nodes are placed as one gang.
void RefuseLaterNodelists(const std::vector<SbatchOptions>& components, Diagnostics* d) {
  for (size_t c = 1; c < components.size(); ++c) {
    if (components[c].nodelist) {
      d->errors.push_back(WhereSet(components[c], "nodelist") +
                          ": --nodelist in a later component of a heterogeneous job: Hangar "
                          "places the job's nodes as one gang; give --nodelist in the first "
                          "component, for the whole job");
    }
  }
}

// The components of a script (one unless it is a heterogeneous job), each with its shape and
// its Slurm variables.
struct Components {
  const std::vector<SbatchOptions>& options;
  const std::vector<Shape>& shapes;
  const std::vector<nlohmann::ordered_json>& envs;
};

// Component `c`'s task group: one replica per node, its resources, the first component's
// workdir, its variables (and, in a heterogeneous job, every component's under _HET_GROUP_n),
// running `command`.
nlohmann::ordered_json GroupOf(size_t c, const Components& all, const Submission& s,
                               const nlohmann::ordered_json& command, Diagnostics* d) {
  const size_t n = all.options.size();
  nlohmann::ordered_json group;
  group["name"] = GroupName(c);
  group["replicas"] = all.shapes[c].nodes;
  // Slurm's nodes are distinct hosts: one replica (one node's tasks) per node.
  if (all.shapes[c].nodes > 1) group["max_per_node"] = 1;
  AddResources(all.options[c], all.shapes[c], s.site, &group, d);
  group["workdir"] = Workdir(all.options[0], s.submit_dir);
  nlohmann::ordered_json env = all.envs[c];
  if (n > 1) {
    env["SLURM_HET_SIZE"] = std::to_string(n);
    for (size_t k = 0; k < n; ++k) {
      for (const char* var : kPerComponentEnv) {
        if (all.envs[k].contains(var))
          env[std::string(var) + "_HET_GROUP_" + std::to_string(k)] = all.envs[k][var];
      }
    }
  }
  group["env"] = env;
  group["command"] = command;
  return group;
}

}  // namespace

StatusOr<BatchJob> ConvertBatchScript(const Submission& s) {
  Diagnostics d;
  HANGAR_ASSIGN_OR_RETURN(std::vector<SbatchOptions> components, ReadOptions(s, &d));
  SbatchOptions& o = components[0];
  // An account chooses the queue where the site maps accounts to queues and no partition is given
  // (the partition, when given, is the queue; the account stays the accounting label).
  if (o.account && !o.partition) {
    auto queue = QueueOfAccount(s.site, *o.account);
    if (!queue.ok()) {
      d.errors.push_back(WhereSet(o, "account") + ": " + queue.status().message());
    } else if (*queue) {
      o.partition = **queue;
    }
  }
  std::vector<Shape> shapes;
  for (const SbatchOptions& c : components) shapes.push_back(ResolveShape(c, s.site, &d));
  const Shape& shape = shapes[0];
  int all_nodes = 0;
  for (const Shape& sh : shapes) all_nodes += sh.nodes;
  const std::string name = JobName(o, s.script_name, &d);
  nlohmann::ordered_json j;
  j["name"] = name;
  AddPolicy(o, &j, &d);
  AddBeginAndHold(o, s.now, &j, &d);
  AddTiming(o, &j, &d);
  AddNodeRules(o, all_nodes, &j, &d);
  RefuseLaterNodelists(components, &d);
  // Several writers share the file.
  const bool append = o.open_mode == "append" || all_nodes > 1;
  const std::string redirect = s.output_to_task ? "" : Redirect(o, name, append, &d);
  const int sig = o.signal ? o.signal->signal : SIGTERM;
  WrapperInputs w{sig == SIGTERM ? "TERM" : "TERM " + TrapName(sig), shape.tasks_per_node, redirect,
                  LoginBashScript(s.script_text), static_cast<int>(components.size())};
  const std::string base = std::filesystem::path(s.script_name).filename().string();
  const std::string wrapper = Wrapper(w);
  std::vector<nlohmann::ordered_json> envs;
  for (size_t c = 0; c < components.size(); ++c)
    envs.push_back(StaticEnv(components[c], shapes[c], name, s));
  j["tasks"] = nlohmann::ordered_json::array();
  const nlohmann::ordered_json command = {"/bin/sh", "-c", wrapper, base, s.script_text};
  for (size_t c = 0; c < components.size(); ++c)
    j["tasks"].push_back(GroupOf(c, {components, shapes, envs}, s, command, &d));
  SortByLine(&d.errors, s.script_name);
  SortByLine(&d.warnings, s.script_name);
  HANGAR_RETURN_IF_ERROR(d.ToStatus());
  BatchJob out{j, ToYaml(j), std::move(o), std::move(d.warnings)};
  // What the directives and the command line carry (a name from -J, say) must pass the job
  // parser's rules too: refused here, with its sentence, rather than by the controller.
  if (auto parsed = job::ParseJobSpec(out.yaml, s.script_name + " (as a job file)"); !parsed.ok()) {
    return parsed.status();
  }
  return out;
}

namespace {

// Whether `s` reads back the same from a literal block (|). yaml-cpp writes one for any string
// but YAML allows no control characters there (the job file then did not parse), turns a \r into
// a line break, and needs an indentation indicator yaml-cpp does not write when the text starts
// with a space; those go double-quoted, with escapes.
bool LiteralKeepsIt(const std::string& s) {
  if (!s.empty() && (s[0] == ' ' || s[0] == '\n')) return false;
  return std::none_of(s.begin(), s.end(), [](char c) {
    const auto u = static_cast<unsigned char>(c);
    return (u < 0x20 && c != '\n' && c != '\t') || u == 0x7f;
  });
}

void Emit(YAML::Emitter& e, const nlohmann::ordered_json& j) {
  if (j.is_object()) {
    e << YAML::BeginMap;
    for (const auto& [k, v] : j.items()) {
      e << YAML::Key << k << YAML::Value;
      Emit(e, v);
    }
    e << YAML::EndMap;
  } else if (j.is_array()) {
    bool scalars = true;
    for (const auto& v : j)
      scalars = scalars && (v.is_number() || (v.is_string() && v.get<std::string>().size() < 40));
    if (scalars) e << YAML::Flow;
    e << YAML::BeginSeq;
    for (const auto& v : j) Emit(e, v);
    e << YAML::EndSeq;
  } else if (j.is_string()) {
    const std::string& s = j.get_ref<const std::string&>();
    // What YAML would read as a number, a boolean or null stays a string.
    const bool number_like =
        s.empty() || s.find_first_not_of("0123456789.-") == std::string::npos || s == "true" ||
        s == "false" || s == "yes" || s == "no" || s == "null" || s == "~";
    if (s.find('\n') != std::string::npos && LiteralKeepsIt(s))
      e << YAML::Literal << s;
    else if (number_like || s.find('\n') != std::string::npos)
      e << YAML::DoubleQuoted << s;
    else
      e << s;
  } else if (j.is_number_unsigned()) {
    e << j.get<uint64_t>();
  } else if (j.is_number_integer()) {
    e << j.get<int64_t>();
  } else if (j.is_boolean()) {
    e << j.get<bool>();
  } else {
    e << YAML::Null;
  }
}

}  // namespace

std::string ToYaml(const nlohmann::ordered_json& j) {
  YAML::Emitter e;
  Emit(e, j);
  return std::string(e.c_str()) + "\n";
}

std::map<std::string, std::string> SubmitterEnvironment() {
  std::map<std::string, std::string> env;
  for (char** e = environ; e && *e; ++e) {
    const std::string kv = *e;
    const size_t eq = kv.find('=');
    if (eq != std::string::npos) env.emplace(kv.substr(0, eq), kv.substr(eq + 1));
  }
  return env;
}

}  // namespace hangar::cli::sbatch
