#include "cli/sbatch.h"

#include <cstdio>

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <csignal>
#include <filesystem>
#include <regex>

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

std::string Where(const SbatchOptions& o, const std::string& option) {
  auto it = o.where.find(option);
  return it == o.where.end() ? "command line" : it->second;
}

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

// What one replica (one Slurm node) asks.
struct Shape {
  int nodes = 1;
  int tasks_per_node = 1;
  int gpus = 0;  // per node
};

StatusOr<Shape> ResolveShape(const SbatchOptions& o) {
  Shape s;
  s.nodes = o.nodes.value_or(1);
  if (o.ntasks_per_node) {
    s.tasks_per_node = *o.ntasks_per_node;
    if (o.ntasks && *o.ntasks != s.nodes * s.tasks_per_node) {
      return Err(Where(o, "ntasks") + ": --ntasks=" + std::to_string(*o.ntasks) +
                 " is not --nodes (" + std::to_string(s.nodes) + ") x --ntasks-per-node (" +
                 std::to_string(s.tasks_per_node) + ", " + Where(o, "ntasks-per-node") +
                 "); give two of the three");
    }
  } else if (o.ntasks) {
    if (*o.ntasks % s.nodes != 0) {
      return Err(Where(o, "ntasks") + ": --ntasks=" + std::to_string(*o.ntasks) +
                 " does not divide evenly among " + std::to_string(s.nodes) +
                 " nodes; Hangar runs the same tasks on every node: give --ntasks-per-node");
    }
    s.tasks_per_node = *o.ntasks / s.nodes;
  }
  if (o.gpus_per_task) {
    s.gpus = *o.gpus_per_task * s.tasks_per_node;
    if (o.gpus_per_node && *o.gpus_per_node != s.gpus) {
      return Err(Where(o, "gpus-per-task") + ": --gpus-per-task x tasks per node (" +
                 std::to_string(s.gpus) + ") disagrees with the GPUs per node (" +
                 std::to_string(*o.gpus_per_node) + ", " + Where(o, "gpus-per-node") +
                 "); give one of them");
    }
  } else {
    s.gpus = o.gpus_per_node.value_or(0);
  }
  if (s.gpus > 64)
    return Err(Where(o, "gpus-per-task") + ": " + std::to_string(s.gpus) +
               " GPUs per node is more than any node has");
  if (!s.gpus && (o.cpus_per_gpu || o.mem_per_gpu_mib)) {
    return Err(Where(o, o.cpus_per_gpu ? "cpus-per-gpu" : "mem-per-gpu") +
               ": --cpus-per-gpu and --mem-per-gpu need GPUs (--gres=gpu:N or --gpus-per-node=N); "
               "without GPUs give "
               "--cpus-per-task and --mem");
  }
  return s;
}

// The task group's resources: per replica, i.e. per Slurm node.
void AddResources(const SbatchOptions& o, const Shape& s, nlohmann::ordered_json* g) {
  if (s.gpus) (*g)["gpus"] = s.gpus;
  if (s.gpus && !o.gpu_type.empty()) (*g)["gpu_models"] = {o.gpu_type};
  if (o.cpus_per_gpu) (*g)["cpu_per_gpu"] = std::to_string(*o.cpus_per_gpu);
  if (o.mem_per_gpu_mib) (*g)["memory_per_gpu"] = FormatMemoryMiB(*o.mem_per_gpu_mib);
  if (o.cpus_per_task) {
    (*g)["cpu"] = std::to_string(*o.cpus_per_task * s.tasks_per_node);
  } else if (!s.gpus && !o.cpus_per_gpu) {
    (*g)["cpu"] = std::to_string(s.tasks_per_node);  // Slurm's default: one CPU per task
  }
  if (o.mem_mib) (*g)["memory"] = FormatMemoryMiB(*o.mem_mib);
}

StatusOr<std::string> JobName(const SbatchOptions& o, const std::string& script_name) {
  static const std::regex name_re(R"(^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$)");
  if (o.job_name) {
    if (std::regex_match(*o.job_name, name_re)) return *o.job_name;
    return Err(Where(o, "job-name") + ": --job-name '" + *o.job_name +
               "' is not a Hangar job name: 1-63 letters, digits, '.', '_' or '-', starting with a "
               "letter or digit");
  }
  // sbatch's default is the script's file name; made into a Hangar name.
  std::string name = std::filesystem::path(script_name).filename().string();
  for (char& c : name) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '_' && c != '-') c = '-';
  }
  if (name.empty() || !std::isalnum(static_cast<unsigned char>(name[0]))) name = "sbatch" + name;
  return name.substr(0, 63);
}

// Timing: Slurm warns --signal's seconds before the end and kills at --time; Hangar signals at
// time_limit and kills after the grace. So time_limit = --time - warning, grace = warning: the
// signal and the kill come when Slurm's would.
Status AddTiming(const SbatchOptions& o, nlohmann::ordered_json* j) {
  const Duration warning = o.signal ? o.signal->before_end : kSlurmKillWait;
  if (o.time && *o.time > 0) {
    if (o.signal && *o.time <= warning) {
      return Err(Where(o, "signal") + ": --signal's warning (" + ExactDuration(warning) +
                 " before the end) is not shorter than --time (" + ExactDuration(*o.time) + ", " +
                 Where(o, "time") + "); give a shorter warning or a longer time");
    }
    (*j)["time_limit"] = ExactDuration(o.signal ? *o.time - warning : *o.time);
  }
  const int sig = o.signal ? o.signal->signal : SIGTERM;
  (*j)["checkpoint"] = {{"signal", job::SignalName(sig)}, {"grace", ExactDuration(warning)}};
  return Status::Ok();
}

Status AddPolicy(const SbatchOptions& o, nlohmann::ordered_json* j) {
  if (o.partition) (*j)["queue"] = *o.partition;
  int priority = 0;
  std::string tier;
  if (o.qos) {
    auto q = MapQos(*o.qos);
    if (!q.ok()) return Err(Where(o, "qos") + ": --qos=" + *o.qos + ": " + q.status().message());
    priority = q->priority;
    tier = q->tier;
  }
  if (o.nice) priority -= *o.nice;
  if (priority) (*j)["priority"] = priority;
  if (!tier.empty()) (*j)["tier"] = tier;
  if (o.array) (*j)["array"] = *o.array;
  if (o.dependency) {
    nlohmann::ordered_json after = nlohmann::ordered_json::object();
    if (!o.dependency->ok.empty()) after["ok"] = o.dependency->ok;
    if (!o.dependency->any.empty()) after["any"] = o.dependency->any;
    if (!o.dependency->notok.empty()) after["notok"] = o.dependency->notok;
    (*j)["after"] = after;
  }
  return Status::Ok();
}

// The variables a Slurm batch script reads that are known at submission; the wrapper adds the
// ones only the running task knows (SLURM_JOB_ID, SLURM_NODEID, SLURM_ARRAY_TASK_ID, ...).
nlohmann::ordered_json StaticEnv(const SbatchOptions& o, const Shape& s, const std::string& name,
                                 const std::string& submit_dir) {
  nlohmann::ordered_json env = nlohmann::ordered_json::object();
  env["SLURM_JOB_NAME"] = name;
  env["SLURM_JOB_NUM_NODES"] = env["SLURM_NNODES"] = std::to_string(s.nodes);
  env["SLURM_NTASKS"] = env["SLURM_NPROCS"] = std::to_string(s.nodes * s.tasks_per_node);
  env["SLURM_NTASKS_PER_NODE"] = std::to_string(s.tasks_per_node);
  if (o.cpus_per_task) env["SLURM_CPUS_PER_TASK"] = std::to_string(*o.cpus_per_task);
  if (s.gpus) env["SLURM_GPUS_ON_NODE"] = std::to_string(s.gpus);
  env["SLURM_JOB_PARTITION"] = o.partition.value_or("default");
  env["SLURM_SUBMIT_DIR"] = submit_dir;
  if (o.array) {
    auto spec = ParseArraySpec(*o.array);  // checked when read
    if (spec.ok() && !spec->indices.empty()) {
      env["SLURM_ARRAY_TASK_COUNT"] = std::to_string(spec->indices.size());
      env["SLURM_ARRAY_TASK_MIN"] = std::to_string(spec->indices.front());
      env["SLURM_ARRAY_TASK_MAX"] = std::to_string(spec->indices.back());
    }
  }
  for (const auto& [k, v] : o.export_env) env[k] = v;
  return env;
}

// srun inside a Hangar task: the task is one Slurm node of the job, so srun runs its command here,
// once per task of this node (-n/--ntasks caps the job's tasks, counted in blocks of
// SLURM_NTASKS_PER_NODE by node, as Slurm's block distribution does); its other options are read
// and set aside.
constexpr const char* kSrunShim = R"SH(#!/bin/sh
# srun as hangar sbatch provides it (docs/slurm.md): runs the command on this node's tasks.
per_node=${SLURM_NTASKS_PER_NODE:-1}; node=${SLURM_NODEID:-0}; total=
while [ $# -gt 0 ]; do
  case "$1" in
    --) shift; break ;;
    -n|--ntasks) total=$2; shift 2 ;;
    -n*) total=${1#-n}; shift ;;
    --ntasks=*) total=${1#--ntasks=}; shift ;;
    --*=*) shift ;;
    --exclusive|--label|--unbuffered|--kill-on-bad-exit|--overlap|--verbose|--quiet|--no-kill|--pty|--exact|--whole|--overcommit|--multi-prog) shift ;;
    --*) shift 2 ;;
    -l|-u|-v|-K|-k|-O|-Q|-X|-Z) shift ;;
    -?) shift 2 ;;
    -*) shift ;;
    *) break ;;
  esac
done
[ $# -gt 0 ] || { echo "srun: no command given" >&2; exit 2; }
here=$per_node
if [ -n "$total" ]; then
  here=$((total - node * per_node))
  [ "$here" -gt "$per_node" ] && here=$per_node
  [ "$here" -gt 0 ] || exit 0
fi
if [ "$here" -eq 1 ]; then
  export SLURM_PROCID=$((node * per_node)) SLURM_LOCALID=0
  exec "$@"
fi
i=0; pids=
while [ "$i" -lt "$here" ]; do
  (export SLURM_PROCID=$((node * per_node + i)) SLURM_LOCALID=$i; exec "$@") &
  pids="$pids $!"; i=$((i + 1))
done
rc=0
for p in $pids; do wait "$p"; s=$?; [ "$s" -ne 0 ] && rc=$s; done
exit $rc
)SH";

struct WrapperInputs {
  std::string trap_signals;  // "TERM USR1"
  int tasks_per_node = 1;
  std::string redirect;  // "> \"out\" 2>&1"
};

// The task's command: /bin/sh -c WRAPPER NAME SCRIPT. It keeps running while the script handles
// the checkpoint signal and SIGTERM (the agent signals the whole process group; the job ends when
// this process does), so it traps them and only waits.
std::string Wrapper(const WrapperInputs& w) {
  std::string s =
      "# hangar sbatch: runs the batch script ($1) as Slurm's batch step would (docs/slurm.md)\n";
  s += "trap : " + w.trap_signals + "\n";
  s += "export SLURM_JOB_ID=\"$HANGAR_JOB_ID\" SLURM_JOBID=\"$HANGAR_JOB_ID\" "
       "SLURM_NODEID=\"${RANK:-0}\" "
       "SLURM_LOCALID=0\n";
  s += "SLURM_PROCID=$((${RANK:-0} * " + std::to_string(w.tasks_per_node) +
       ")); export SLURM_PROCID\n";
  s += "if [ -n \"${HANGAR_ARRAY_INDEX:-}\" ]; then\n"
       "  export SLURM_ARRAY_JOB_ID=\"$HANGAR_ARRAY_JOB_ID\" "
       "SLURM_ARRAY_TASK_ID=\"$HANGAR_ARRAY_INDEX\"\n"
       "fi\n";
  s += "hangar_node=$(uname -n); hangar_node=${hangar_node%%.*}; hangar_user=$(id -un "
       "2>/dev/null)\n";
  s += "export SLURMD_NODENAME=\"$hangar_node\"\n";
  s += "hangar_dir=$(mktemp -d \"${TMPDIR:-/tmp}/hangar-sbatch.XXXXXX\") || exit 1\n";
  s += "printf '%s' \"$1\" > \"$hangar_dir/slurm_script\" || exit 1\n";
  s += "cat > \"$hangar_dir/srun\" <<'HANGAR_SRUN'\n" + std::string(kSrunShim) + "HANGAR_SRUN\n";
  s += "chmod 700 \"$hangar_dir/slurm_script\" \"$hangar_dir/srun\"\n";
  s += "PATH=\"$hangar_dir:$PATH\"; export PATH\n";
  s += "\"$hangar_dir/slurm_script\" " + w.redirect + "\n";
  s += "hangar_rc=$?\nrm -rf \"$hangar_dir\"\nexit $hangar_rc\n";
  return s;
}

StatusOr<std::string> Redirect(const SbatchOptions& o, const std::string& name, bool append) {
  const std::string default_out = o.array ? "slurm-%A_%a.out" : "slurm-%j.out";
  auto out = OutputPatternToShell(o.output.value_or(default_out), name);
  if (!out.ok())
    return Err(Where(o, "output") + ": --output=" + o.output.value_or("") + ": " +
               out.status().message());
  const std::string op = append ? ">>" : ">";
  if (!o.error || o.error == o.output) return op + " " + *out + " 2>&1";
  auto err = OutputPatternToShell(*o.error, name);
  if (!err.ok())
    return Err(Where(o, "error") + ": --error=" + *o.error + ": " + err.status().message());
  return op + " " + *out + " 2" + op + " " + *err;
}

// A script is carried into the job as written, and a job's command holds no control character
// but tab and newline: refuse any other here, with its line, as sbatch refuses DOS line breaks.
Status CheckScriptText(const std::string& text, const std::string& name) {
  int line = 1;
  for (unsigned char c : text) {
    if (c == '\n') {
      ++line;
    } else if (c == '\r') {
      return Err(name + ":" + std::to_string(line) +
                 ": the script has DOS line breaks (\\r\\n), which sbatch refuses too: convert it with "
                 "dos2unix and submit it again");
    } else if ((c < 0x20 && c != '\t') || c == 0x7f) {
      char hex[8];
      std::snprintf(hex, sizeof hex, "0x%02x", c);
      return Err(name + ":" + std::to_string(line) + ": the script holds a control character (" + hex +
                 "); a job's command may hold only tab and newline: remove it");
    }
  }
  return Status::Ok();
}

StatusOr<SbatchOptions> ReadOptions(const Submission& s) {
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
  HANGAR_ASSIGN_OR_RETURN(auto lines, ReadDirectives(s.script_text, s.script_name));
  HANGAR_ASSIGN_OR_RETURN(auto command_line, ReadCommandLine(s.command_line));
  lines.insert(lines.end(), command_line.begin(), command_line.end());  // the command line wins
  SbatchOptions o;
  for (const auto& d : lines) HANGAR_RETURN_IF_ERROR(ApplyDirective(d, s.script_name, &o));
  return o;
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

StatusOr<std::string> OutputPatternToShell(std::string_view pattern, const std::string& job_name) {
  std::string out = "\"";
  auto literal = [&](char c) {
    if (c == '"' || c == '\\' || c == '$' || c == '`') out += '\\';
    out += c;
  };
  for (size_t i = 0; i < pattern.size(); ++i) {
    if (pattern[i] != '%') {
      literal(pattern[i]);
      continue;
    }
    size_t j = i + 1;
    int width = 0;
    while (j < pattern.size() && std::isdigit(static_cast<unsigned char>(pattern[j])))
      width = width * 10 + (pattern[j++] - '0');
    if (j >= pattern.size())
      return Err("'" + std::string(pattern) + "' ends in a lone %; write %% for a percent sign");
    const char c = pattern[j];
    std::string var;
    if (c == 'j')
      var = "${HANGAR_JOB_ID}";
    else if (c == 'A')
      var = "${HANGAR_ARRAY_JOB_ID:-$HANGAR_JOB_ID}";
    else if (c == 'a')
      var = "${HANGAR_ARRAY_INDEX:-4294967294}";  // Slurm's NO_VAL outside an array
    else if (c == 'n')
      var = "${SLURM_NODEID}";
    else if (c == 'N')
      var = "${hangar_node}";
    else if (c == 'u')
      var = "${hangar_user}";
    else if (c == 'x') {
      for (char n : job_name) literal(n);
      i = j;
      continue;
    } else if (c == '%' && width == 0) {
      out += '%';
      i = j;
      continue;
    } else {
      return Err("'%" + std::string(1, c) + "' in '" + std::string(pattern) +
                 "' cannot be honoured (hangar sbatch fills %j %A %a %x %N %n %u and %%; a batch "
                 "script has no step or "
                 "task of its own)");
    }
    if (width > 10)
      return Err("zero-padding to " + std::to_string(width) + " digits; Slurm allows at most 10");
    out += width ? "$(printf %0" + std::to_string(width) + "d \"" + var + "\")" : var;
    i = j;
  }
  return out + "\"";
}

StatusOr<BatchJob> ConvertBatchScript(const Submission& s) {
  HANGAR_ASSIGN_OR_RETURN(SbatchOptions o, ReadOptions(s));
  HANGAR_ASSIGN_OR_RETURN(Shape shape, ResolveShape(o));
  HANGAR_ASSIGN_OR_RETURN(std::string name, JobName(o, s.script_name));
  nlohmann::ordered_json j;
  j["name"] = name;
  HANGAR_RETURN_IF_ERROR(AddPolicy(o, &j));
  HANGAR_RETURN_IF_ERROR(AddTiming(o, &j));
  const bool append = o.open_mode == "append" || shape.nodes > 1;  // several writers share the file
  HANGAR_ASSIGN_OR_RETURN(std::string redirect, Redirect(o, name, append));
  const int sig = o.signal ? o.signal->signal : SIGTERM;
  WrapperInputs w{sig == SIGTERM ? "TERM" : "TERM " + TrapName(sig), shape.tasks_per_node,
                  redirect};
  nlohmann::ordered_json group;
  group["name"] = "batch";
  group["replicas"] = shape.nodes;
  AddResources(o, shape, &group);
  group["workdir"] = Workdir(o, s.submit_dir);
  group["env"] = StaticEnv(o, shape, name, s.submit_dir);
  const std::string base = std::filesystem::path(s.script_name).filename().string();
  group["command"] = {"/bin/sh", "-c", Wrapper(w), base, s.script_text};
  j["tasks"] = nlohmann::ordered_json::array({group});
  BatchJob out{j, ToYaml(j), std::move(o)};
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
    const bool number_like = s.empty() || s.find_first_not_of("0123456789.-") == std::string::npos;
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

}  // namespace hangar::cli::sbatch
