#include "cli/slurm_srun.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "cli/srun_client.h"
#include "common/status.h"
#include "common/unix_socket.h"

namespace hangar::cli {
namespace {

// srun's options that take a value, long and short; any other option is a flag.
const std::set<std::string> kValued = {"ntasks",
                                       "nodes",
                                       "ntasks-per-node",
                                       "cpus-per-task",
                                       "job-name",
                                       "cpu-bind",
                                       "mem",
                                       "mem-per-cpu",
                                       "mem-per-gpu",
                                       "gres",
                                       "gpus",
                                       "gpus-per-task",
                                       "gpus-per-node",
                                       "nodelist",
                                       "exclude",
                                       "mpi",
                                       "time",
                                       "output",
                                       "error",
                                       "input",
                                       "export",
                                       "partition",
                                       "account",
                                       "distribution",
                                       "het-group",
                                       "container-image",
                                       "container-mounts",
                                       "container-workdir",
                                       "container-name",
                                       "container-env",
                                       "container-save",
                                       "chdir",
                                       "constraint",
                                       "gpu-bind",
                                       "signal",
                                       "jobid",
                                       "dependency",
                                       "qos",
                                       "comment",
                                       "threads-per-core",
                                       "hint",
                                       "wait"};
const std::set<char> kValuedShort = {'n', 'N', 'c', 'J', 'w', 'x', 't', 'o',
                                     'e', 'i', 'p', 'A', 'm', 'C', 'D', 'W'};
// Options whose meaning a step cannot honour here: refused with the reason, never ignored.
const std::set<std::string> kRefused = {"jobid", "output", "error", "input"};
// pyxis's options that only tune what Hangar does anyway, or that have no effect here: a warning.
const std::set<std::string> kPyxisSetAside = {
    "container-name",          "container-env",           "container-save",
    "container-mount-home",    "no-container-mount-home", "container-remap-root",
    "no-container-remap-root", "container-writable",      "container-readonly",
    "container-entrypoint",    "no-container-entrypoint"};

int Error(const std::string& what) {
  std::fprintf(stderr, "srun: error: %s\n", what.c_str());
  return 1;
}

int EnvInt(const std::string& name, int fallback) {
  const char* v = std::getenv(name.c_str());
  if (v == nullptr || *v == '\0') return fallback;
  char* end = nullptr;
  const long n = std::strtol(v, &end, 10);
  return *end == '\0' && n >= 0 && n < 1000000 ? static_cast<int>(n) : fallback;
}

// The job's tasks on each node, as srun defaults to: SLURM_NTASKS_PER_NODE when the script asked
// it, else the count SLURM_TASKS_PER_NODE starts with ("4(x2)": 4; Hangar's nodes are equal), as
// Slurm's srun reads the allocation's layout; 1 without either.
// In a heterogeneous job, `suffix` ("_HET_GROUP_1") names the component's own variables.
int JobTasksPerNode(const std::string& suffix = "") {
  if (!suffix.empty() && std::getenv(("SLURM_TASKS_PER_NODE" + suffix).c_str()) == nullptr)
    return JobTasksPerNode();
  if (int n = EnvInt("SLURM_NTASKS_PER_NODE" + suffix, 0); n > 0) return n;
  const char* v = std::getenv(("SLURM_TASKS_PER_NODE" + suffix).c_str());
  if (v == nullptr) return 1;
  char* end = nullptr;
  const long n = std::strtol(v, &end, 10);
  return end != v && n > 0 && n < 1000000 ? static_cast<int>(n) : 1;
}

volatile sig_atomic_t g_forward = 0;
void Remember(int sig) { g_forward = sig; }

// What srun's options ask of the step, and where its command begins.
struct Step {
  int ntasks = -1, nodes = -1, per_node = -1;
  std::string nodelist, exclude;
  bool label = false, kill_on_bad_exit = false;
  int gpus_per_task = 0;       // --gpus-per-task (or --gpu-bind=per_task:N); 0: not given
  bool gpu_bind_none = false;  // --gpu-bind=none: every task sees all of its node's GPUs
  size_t command = 0;          // index of the command in the arguments
  // --het-group: a heterogeneous job's components; in one, srun defaults to component 0.
  std::vector<int> het_groups;
  std::string container_image, container_workdir;  // pyxis's --container-*
  std::vector<std::string> container_mounts;
  std::vector<std::string> set_aside;  // options accepted without effect, for the warning
  // The variables' suffix of the step's first component ("_HET_GROUP_1"); empty outside one.
  std::string HetSuffix() const {
    return het_groups.empty() ? "" : "_HET_GROUP_" + std::to_string(het_groups.front());
  }
};

// --het-group=0,2-3: the components, in order, each once; false on anything else.
bool ParseHetGroups(const std::string& value, std::vector<int>* out) {
  out->clear();
  for (size_t at = 0; at <= value.size();) {
    const size_t comma = value.find(',', at);
    const std::string part =
        value.substr(at, comma == std::string::npos ? std::string::npos : comma - at);
    const size_t dash = part.find('-');
    char* end = nullptr;
    const long lo = std::strtol(part.c_str(), &end, 10);
    if (part.empty() || end == part.c_str() || (*end != '\0' && *end != '-')) return false;
    long hi = lo;
    if (dash != std::string::npos) {
      const std::string rest = part.substr(dash + 1);
      hi = std::strtol(rest.c_str(), &end, 10);
      if (rest.empty() || *end != '\0') return false;
    }
    if (lo < 0 || hi < lo || hi > 127) return false;
    for (long g = lo; g <= hi; ++g) {
      if (std::find(out->begin(), out->end(), g) == out->end()) out->push_back(static_cast<int>(g));
    }
    if (comma == std::string::npos) break;
    at = comma + 1;
  }
  return !out->empty();
}

// GPUs each task gets of its node's, as Slurm binds them since 21.08: --gpus-per-task, else the
// job's (SLURM_GPUS_PER_TASK, from sbatch --gpus-per-task); none with --gpu-bind=none.
int GpusPerTask(const Step& step) {
  if (step.gpu_bind_none) return 0;
  if (step.gpus_per_task > 0) return step.gpus_per_task;
  const std::string het = "SLURM_GPUS_PER_TASK" + step.HetSuffix();
  return EnvInt(std::getenv(het.c_str()) ? het : "SLURM_GPUS_PER_TASK", 0);
}

// One option (args[*i], and its value where it takes one): its long name and value.
Status ReadOption(const std::vector<std::string>& args, size_t* i, std::string* name,
                  std::string* value) {
  const std::string& a = args[*i];
  if (a[1] == '-') {
    *name = a.substr(2);
    bool has_value = false;
    if (const size_t eq = name->find('='); eq != std::string::npos) {
      *value = name->substr(eq + 1), *name = name->substr(0, eq), has_value = true;
    }
    if (kValued.count(*name) && !has_value) {
      if (*i + 1 >= args.size())
        return Status::InvalidArgument("option --" + *name + " needs a value");
      *value = args[++*i];
    }
    return Status::Ok();
  }
  const char c = a[1];
  static const std::pair<char, const char*> kLong[] = {
      {'n', "ntasks"},  {'N', "nodes"},           {'c', "cpus-per-task"}, {'w', "nodelist"},
      {'x', "exclude"}, {'o', "output"},          {'e', "error"},         {'i', "input"},
      {'l', "label"},   {'K', "kill-on-bad-exit"}};
  *name = std::string(1, c);
  for (auto [s, l] : kLong)
    if (s == c) *name = l;
  if (!kValuedShort.count(c)) return Status::Ok();
  if (a.size() > 2) {
    *value = a.substr(2);
  } else if (*i + 1 < args.size()) {
    *value = args[++*i];
  } else {
    return Status::InvalidArgument("option -" + std::string(1, c) + " needs a value");
  }
  return Status::Ok();
}

// A count of 1 to 4096, or false.
bool Count(const std::string& value, int* out) {
  char* end = nullptr;
  const long n = std::strtol(value.c_str(), &end, 10);
  if (value.empty() || *end != '\0' || n < 1 || n > 4096) return false;
  *out = static_cast<int>(n);
  return true;
}

StatusOr<Step> ParseStep(const std::vector<std::string>& args) {
  Step step;
  size_t i = 0;
  for (; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--") {
      ++i;
      break;
    }
    if (a.size() < 2 || a[0] != '-') break;  // the command
    std::string name, value;
    HANGAR_RETURN_IF_ERROR(ReadOption(args, &i, &name, &value));
    if (kRefused.count(name)) {
      return Status::InvalidArgument(
          "--" + name +
          " is not honoured by Hangar's srun yet (docs/slurm.md, \"What still "
          "differs\"); leave it out");
    }
    if (name == "gpus-per-task" &&
        !Count(value.substr(value.rfind(':') + 1), &step.gpus_per_task)) {
      return Status::InvalidArgument("--gpus-per-task=" + value +
                                     " is not a count of GPUs ([TYPE:]N, N from 1 to 4096)");
    }
    if (name == "gpu-bind") {
      // verbose,none / none / per_task:N; the other forms (closest, map_gpu, ...) bind nothing.
      const std::string bind = value.rfind("verbose,", 0) == 0 ? value.substr(8) : value;
      step.gpu_bind_none = bind == "none";
      if (bind.rfind("per_task:", 0) == 0 && !Count(bind.substr(9), &step.gpus_per_task)) {
        return Status::InvalidArgument("--gpu-bind=" + value + " is not per_task:N (N GPUs)");
      }
    }
    if (name == "het-group" && !ParseHetGroups(value, &step.het_groups)) {
      return Status::InvalidArgument("--het-group=" + value +
                                     " is not a list of components (e.g. 0, 1 or 0-1)");
    }
    if (name == "container-image") step.container_image = value;
    if (name == "container-workdir") step.container_workdir = value;
    if (name == "container-mounts") {
      for (size_t at = 0; at < value.size();) {
        const size_t comma = value.find(',', at);
        const std::string m =
            value.substr(at, comma == std::string::npos ? std::string::npos : comma - at);
        if (!m.empty()) step.container_mounts.push_back(m);
        if (comma == std::string::npos) break;
        at = comma + 1;
      }
    }
    if (kPyxisSetAside.count(name)) step.set_aside.push_back("--" + name);
    if (name == "nodelist") step.nodelist = value;
    if (name == "exclude") step.exclude = value;
    if (name == "label") step.label = true;
    if (name == "kill-on-bad-exit") step.kill_on_bad_exit = value != "0";
    if (name == "ntasks" && !Count(value, &step.ntasks)) {
      return Status::InvalidArgument("--ntasks=" + value + " is not a count of tasks (1 to 4096)");
    }
    if (name == "ntasks-per-node" && !Count(value, &step.per_node)) {
      return Status::InvalidArgument("--ntasks-per-node=" + value + " is not a count");
    }
    // -N 1-2 is a range: its least is what this node can give.
    if (name == "nodes" && !Count(value, &step.nodes) &&
        (value.find('-') == std::string::npos ||
         !Count(value.substr(0, value.find('-')), &step.nodes))) {
      return Status::InvalidArgument("--nodes=" + value.substr(0, value.find('-')) +
                                     " is not a count of nodes");
    }
  }
  if (i >= args.size())
    return Status::InvalidArgument("no command to run (srun [OPTIONS] COMMAND [ARGS...])");
  if (step.container_image.empty() &&
      (!step.container_mounts.empty() || !step.container_workdir.empty())) {
    return Status::InvalidArgument(
        "--container-mounts and --container-workdir apply to a step in a container: give "
        "--container-image too");
  }
  // In a heterogeneous job srun runs on its first component unless told (as Slurm's does).
  if (step.het_groups.empty() && std::getenv("SLURM_HET_SIZE") != nullptr)
    step.het_groups.push_back(0);
  step.command = i;
  return step;
}

// Without the agent's step socket (a container task): the step runs on this node only.
Status CheckLocal(const Step& step) {
  if (!step.container_image.empty()) {
    return Status::InvalidArgument(
        "this srun cannot reach its node's agent (HANGAR_AGENT_SOCKET), which runs a step in a "
        "container (--container-image)");
  }
  if (step.nodes > 1 || !step.nodelist.empty() || !step.exclude.empty()) {
    return Status::InvalidArgument(
        "this srun cannot reach its node's agent (HANGAR_AGENT_SOCKET), so it runs steps on this "
        "node only; "
        "--nodes above 1, --nodelist and --exclude need the agent");
  }
  return Status::Ok();
}

// Starts task `t` of `tasks` (its rank from this node's place in the job) running argv; with
// `gpus` set, as its CUDA_VISIBLE_DEVICES.
pid_t StartTask(char* const* argv, int t, int tasks, int node_id, int node_tasks,
                const std::string* gpus) {
  const pid_t pid = fork();
  if (pid != 0) return pid;
  if (gpus != nullptr) setenv("CUDA_VISIBLE_DEVICES", gpus->c_str(), 1);
  for (int sig : {SIGINT, SIGTERM, SIGUSR1, SIGUSR2, SIGHUP}) signal(sig, SIG_DFL);
  const std::string procid = std::to_string(node_id * node_tasks + t), localid = std::to_string(t),
                    count = std::to_string(tasks);
  setenv("SLURM_PROCID", procid.c_str(), 1);
  setenv("SLURM_LOCALID", localid.c_str(), 1);
  setenv("SLURM_STEP_NUM_TASKS", count.c_str(), 1);
  setenv("SLURM_STEP_NUM_NODES", "1", 1);
  if (const char* node = std::getenv("HANGAR_NODE")) setenv("SLURM_STEP_NODELIST", node, 1);
  execvp(argv[0], argv);
  // As Slurm's step daemon: the task exits with the error number (2: not found, 13: not allowed).
  const int error = errno;
  std::fprintf(stderr, "slurmstepd: error: execve(): %s: %s\n", argv[0], std::strerror(error));
  _exit(error > 0 && error < 126 ? error : 1);
}

// Waits for every child, passing srun's signals on to them; the worst status (128+N: signal N).
int WaitWorst(const std::vector<pid_t>& children) {
  int worst = 0;
  size_t left = children.size();
  while (left > 0) {
    int status = 0;
    const pid_t pid = waitpid(-1, &status, 0);
    if (pid < 0) {
      if (errno != EINTR) break;
      if (const int sig = g_forward; sig != 0) {
        g_forward = 0;
        for (pid_t c : children) kill(c, sig);
      }
      continue;
    }
    --left;
    const int code = WIFEXITED(status)     ? WEXITSTATUS(status)
                     : WIFSIGNALED(status) ? 128 + WTERMSIG(status)
                                           : 1;
    worst = std::max(worst, code);
  }
  return worst;
}

int RunLocal(const std::vector<std::string>& args, const Step& parsed) {
  if (Status ok = CheckLocal(parsed); !ok.ok()) return Error(ok.message());
  const Step* step = &parsed;
  const int tasks = step->ntasks > 0     ? step->ntasks
                    : step->per_node > 0 ? step->per_node
                                         : JobTasksPerNode();
  const int node_id = EnvInt("SLURM_NODEID", 0), node_tasks = JobTasksPerNode();
  std::vector<char*> argv;
  for (size_t k = step->command; k < args.size(); ++k)
    argv.push_back(const_cast<char*>(args[k].c_str()));
  argv.push_back(nullptr);
  struct sigaction forward {};
  forward.sa_handler = Remember;
  sigemptyset(&forward.sa_mask);
  for (int sig : {SIGINT, SIGTERM, SIGUSR1, SIGUSR2, SIGHUP}) sigaction(sig, &forward, nullptr);
  // With GPUs per task: this node's (CUDA_VISIBLE_DEVICES), each task its own in turn.
  const int per_task = GpusPerTask(*step);
  std::vector<std::string> own(static_cast<size_t>(tasks));
  if (per_task > 0) {
    const char* visible = std::getenv("CUDA_VISIBLE_DEVICES");
    std::vector<std::string> devices;
    for (size_t at = 0; visible != nullptr && *visible != '\0';) {
      const std::string all = visible;
      const size_t comma = all.find(',', at);
      devices.push_back(
          all.substr(at, comma == std::string::npos ? std::string::npos : comma - at));
      if (comma == std::string::npos) break;
      at = comma + 1;
    }
    if (static_cast<size_t>(tasks) * static_cast<size_t>(per_task) > devices.size()) {
      return Error(std::to_string(tasks) + " task(s) of --gpus-per-task=" +
                   std::to_string(per_task) + " need " + std::to_string(tasks * per_task) +
                   " GPUs; this task has " + std::to_string(devices.size()) +
                   " (CUDA_VISIBLE_DEVICES): run fewer tasks, or --gpu-bind=none");
    }
    for (size_t t = 0; t < own.size(); ++t) {
      for (size_t g = t * static_cast<size_t>(per_task);
           g < (t + 1) * static_cast<size_t>(per_task); ++g)
        own[t] += (own[t].empty() ? "" : ",") + devices[g];
    }
  }
  std::vector<pid_t> children;
  for (int t = 0; t < tasks; ++t) {
    const pid_t pid = StartTask(argv.data(), t, tasks, node_id, node_tasks,
                                per_task > 0 ? &own[static_cast<size_t>(t)] : nullptr);
    if (pid < 0) return Error("cannot start task " + std::to_string(t) + ": out of processes");
    children.push_back(pid);
  }
  return WaitWorst(children);
}

// Variables that belong to the caller's own node and task: each step task gets its node's.
bool NodeOwn(const std::string& name) {
  static const std::set<std::string> kOwn = {"CUDA_VISIBLE_DEVICES",
                                             "NVIDIA_VISIBLE_DEVICES",
                                             "HANGAR_NODE",
                                             "HANGAR_TASK_INDEX",
                                             "HANGAR_TASK_ID",
                                             "HANGAR_TASK_GROUP",
                                             "HANGAR_AGENT_SOCKET",
                                             "RANK",
                                             "LOCAL_RANK",
                                             "NODE_RANK",
                                             "GROUP_RANK",
                                             "LOCAL_WORLD_SIZE",
                                             "SLURMD_NODENAME",
                                             "SLURM_NODEID",
                                             "SLURM_PROCID",
                                             "SLURM_LOCALID",
                                             "PWD",
                                             "OLDPWD",
                                             "SHLVL",
                                             "_",
                                             "TMPDIR",
                                             "HANGAR_GPU_FRACTION",
                                             "HANGAR_GPU_MEMORY_MIB",
                                             "HANGAR_MIG_PROFILE",
                                             "HANGAR_MIG_PLACEMENT"};
  return kOwn.count(name) > 0 || name.rfind("NCCL_IB_", 0) == 0 || name == "NCCL_SOCKET_IFNAME" ||
         name == "GLOO_SOCKET_IFNAME" || name == "UCX_NET_DEVICES" ||
         name.rfind("CUDA_MPS_", 0) == 0;
}

std::string StepRequestJson(const std::vector<std::string>& args, const Step& step) {
  nlohmann::json r = {{"op", "srun"}, {"task_id", std::getenv("HANGAR_TASK_ID")}};
  r["argv"] = std::vector<std::string>(args.begin() + static_cast<long>(step.command), args.end());
  std::vector<std::string> env;
  // A login shell's /etc/profile took the batch step's Slurm commands out of PATH (the script
  // reached srun as a bash function: sbatch_wrapper.cc); its steps get them back in front, as
  // any other script's steps have them.
  const char* commands = std::getenv("HANGAR_SLURM_COMMANDS");
  for (char** e = environ; *e != nullptr; ++e) {
    std::string kv = *e;
    const size_t eq = kv.find('=');
    if (eq == std::string::npos || NodeOwn(kv.substr(0, eq))) continue;
    if (kv.rfind("SLURM_GPUS_PER_TASK=", 0) == 0) continue;  // the step's, below
    if (commands != nullptr && *commands != '\0' && kv.rfind("PATH=", 0) == 0 &&
        (":" + kv.substr(5) + ":").find(std::string(":") + commands + ":") == std::string::npos) {
      kv = "PATH=" + std::string(commands) + ":" + kv.substr(5);
    }
    env.push_back(std::move(kv));
  }
  // A step on a heterogeneous job's component sees that component's variables without their
  // suffix, as Slurm's srun sets them (the batch step's are the first component's).
  if (const std::string suffix = step.HetSuffix(); !suffix.empty()) {
    for (const char* var : {"SLURM_NNODES", "SLURM_JOB_NUM_NODES", "SLURM_NTASKS", "SLURM_NPROCS",
                            "SLURM_NTASKS_PER_NODE", "SLURM_TASKS_PER_NODE", "SLURM_CPUS_PER_TASK",
                            "SLURM_GPUS_ON_NODE", "SLURM_JOB_PARTITION"}) {
      const std::string name = var;
      env.erase(std::remove_if(env.begin(), env.end(),
                               [&](const std::string& kv) { return kv.rfind(name + "=", 0) == 0; }),
                env.end());
      if (const char* own = std::getenv((name + suffix).c_str())) env.push_back(name + "=" + own);
    }
  }
  if (const int per_task = GpusPerTask(step); per_task > 0)
    env.push_back("SLURM_GPUS_PER_TASK=" + std::to_string(per_task));
  r["env"] = env;
  char cwd[4096];
  if (getcwd(cwd, sizeof cwd) != nullptr) r["workdir"] = cwd;
  if (step.nodes > 0) r["nodes"] = step.nodes;
  if (step.ntasks > 0) r["ntasks"] = step.ntasks;
  if (step.per_node > 0) r["ntasks_per_node"] = step.per_node;
  r["default_ntasks_per_node"] = JobTasksPerNode(step.HetSuffix());
  r["nodelist"] = step.nodelist;
  r["exclude"] = step.exclude;
  r["kill_on_bad_exit"] = step.kill_on_bad_exit;
  if (!step.het_groups.empty()) r["het_groups"] = step.het_groups;
  if (!step.container_image.empty()) {
    r["container"] = {{"image", step.container_image},
                      {"mounts", step.container_mounts},
                      {"workdir", step.container_workdir}};
  }
  return r.dump();
}

// Writes a task's bytes, each line prefixed "PROCID: " with --label (a partial line waits).
class Output {
 public:
  explicit Output(bool label) : label_(label) {}
  void Write(int procid, const std::string& bytes, bool err) {
    FILE* to = err ? stderr : stdout;
    if (!label_) {
      std::fwrite(bytes.data(), 1, bytes.size(), to);
      std::fflush(to);
      return;
    }
    std::string& pending = pending_[{procid, err}];
    pending += bytes;
    size_t nl;
    while ((nl = pending.find('\n')) != std::string::npos) {
      std::fprintf(to, "%d: %s\n", procid, pending.substr(0, nl).c_str());
      pending.erase(0, nl + 1);
    }
    std::fflush(to);
  }
  void Flush() {
    for (auto& [key, pending] : pending_) {
      if (!pending.empty())
        std::fprintf(key.second ? stderr : stdout, "%d: %s\n", key.first, pending.c_str());
    }
    std::fflush(stdout);
    std::fflush(stderr);
  }

 private:
  bool label_;
  std::map<std::pair<int, bool>, std::string> pending_;
};

}  // namespace

int RunSrunInJob(const std::vector<std::string>& args) {
  if (std::getenv("HANGAR_JOB_ID") == nullptr) {
    return Error(
        "srun launches steps inside a job: put it in a batch script and submit that with sbatch "
        "(hangar sbatch)");
  }
  const char* agent = std::getenv("HANGAR_AGENT_SOCKET");
  if (args.size() == 1 &&
      args[0] == "--hangar-release-allocation") {  // hangar sbatch's wrapper, at the end
    if (agent == nullptr || std::getenv("HANGAR_TASK_ID") == nullptr)
      return Error("no agent socket to release to");
    nlohmann::json r = {{"op", "release"}, {"task_id", std::getenv("HANGAR_TASK_ID")}};
    auto ended =
        RunStepRequest(unix_socket::StepSocketPath(agent), r.dump(), [](const StepFrame&) {});
    if (!ended.ok()) return Error(ended.status().message());
    if (!ended->error.empty()) return Error(ended->error);
    return 0;
  }
  StatusOr<Step> step = ParseStep(args);
  if (!step.ok()) return Error(step.status().message());
  for (const std::string& o : step->set_aside) {
    std::fprintf(stderr,
                 "srun: warning: %s has no effect here (Hangar runs each step in a fresh "
                 "container of --container-image, as the task's user)\n",
                 o.c_str());
  }
  const char* socket = std::getenv("HANGAR_AGENT_SOCKET");
  const char* task = std::getenv("HANGAR_TASK_ID");
  if (socket == nullptr || task == nullptr) return RunLocal(args, *step);
  // The job's checkpoint signal reaches the whole task's process group, this srun too: the
  // controller gives it to the step's tasks itself (step_relay.h), so srun stays to relay their
  // output and status rather than dying of it. (TERM, INT and HUP still end srun, and with it
  // the step, as Slurm's srun ends its step.)
  for (int sig : {SIGUSR1, SIGUSR2}) signal(sig, SIG_IGN);  // srun runs no program of its own
  Output out(step->label);
  auto ended = RunStepRequest(unix_socket::StepSocketPath(socket), StepRequestJson(args, *step),
                              [&](const StepFrame& f) {
                                if (!f.out.empty()) out.Write(f.procid, f.out, false);
                                if (!f.err.empty()) out.Write(f.procid, f.err, true);
                              });
  out.Flush();
  if (!ended.ok()) {
    if (ended.status().message().rfind("cannot reach", 0) == 0) return RunLocal(args, *step);
    return Error(ended.status().message());
  }
  if (!ended->error.empty()) Error(ended->error);
  return ended->exit_code;
}

}  // namespace hangar::cli
