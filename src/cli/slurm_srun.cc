#include "cli/slurm_srun.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <set>
#include <string>
#include <vector>

#include "common/status.h"

namespace hangar::cli {
namespace {

// srun's options that take a value, long and short; any other option is a flag.
const std::set<std::string> kValued = {
    "ntasks", "nodes", "ntasks-per-node", "cpus-per-task", "job-name", "cpu-bind", "mem", "mem-per-cpu",
    "mem-per-gpu", "gres", "gpus", "gpus-per-task", "gpus-per-node", "nodelist", "exclude", "mpi", "time",
    "output", "error", "input", "export", "partition", "account", "distribution", "het-group", "container-image",
    "container-mounts", "container-workdir", "chdir", "constraint", "gpu-bind", "signal", "jobid", "dependency",
    "qos", "comment", "threads-per-core", "hint", "wait"};
const std::set<char> kValuedShort = {'n', 'N', 'c', 'J', 'w', 'x', 't', 'o', 'e', 'i', 'p', 'A', 'm', 'C', 'D', 'W'};
// Options whose meaning this local step cannot honour: refused with the reason, never ignored.
const std::set<std::string> kRefused = {"nodelist", "exclude", "het-group", "container-image", "jobid",
                                        "output", "error", "input"};

int Error(const std::string& what) {
  std::fprintf(stderr, "srun: error: %s\n", what.c_str());
  return 1;
}

int EnvInt(const char* name, int fallback) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return fallback;
  char* end = nullptr;
  const long n = std::strtol(v, &end, 10);
  return *end == '\0' && n >= 0 && n < 1000000 ? static_cast<int>(n) : fallback;
}

volatile sig_atomic_t g_forward = 0;
void Remember(int sig) { g_forward = sig; }

// What srun's options ask of the step, and where its command begins.
struct Step {
  int ntasks = -1, nodes = 1, per_node = -1;
  size_t command = 0;  // index of the command in the arguments
};

// One option (args[*i], and its value where it takes one): its long name and value.
Status ReadOption(const std::vector<std::string>& args, size_t* i, std::string* name, std::string* value) {
  const std::string& a = args[*i];
  if (a[1] == '-') {
    *name = a.substr(2);
    bool has_value = false;
    if (const size_t eq = name->find('='); eq != std::string::npos) {
      *value = name->substr(eq + 1), *name = name->substr(0, eq), has_value = true;
    }
    if (kValued.count(*name) && !has_value) {
      if (*i + 1 >= args.size()) return Status::InvalidArgument("option --" + *name + " needs a value");
      *value = args[++*i];
    }
    return Status::Ok();
  }
  const char c = a[1];
  static const std::pair<char, const char*> kLong[] = {{'n', "ntasks"}, {'N', "nodes"}, {'c', "cpus-per-task"},
                                                       {'w', "nodelist"}, {'x', "exclude"}, {'o', "output"},
                                                       {'e', "error"}, {'i', "input"}};
  *name = std::string(1, c);
  for (auto [s, l] : kLong) if (s == c) *name = l;
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
          "--" + name + " is not honoured by an srun called from a job's own processes (it runs on this node "
          "only); call srun from the batch script itself, whose srun spreads over the job's nodes");
    }
    if (name == "ntasks" && !Count(value, &step.ntasks)) {
      return Status::InvalidArgument("--ntasks=" + value + " is not a count of tasks (1 to 4096)");
    }
    if (name == "ntasks-per-node" && !Count(value, &step.per_node)) {
      return Status::InvalidArgument("--ntasks-per-node=" + value + " is not a count");
    }
    // -N 1-2 is a range: its least is what this node can give.
    if (name == "nodes" && !Count(value, &step.nodes) &&
        (value.find('-') == std::string::npos || !Count(value.substr(0, value.find('-')), &step.nodes))) {
      return Status::InvalidArgument("--nodes=" + value.substr(0, value.find('-')) + " is not a count of nodes");
    }
  }
  if (i >= args.size()) return Status::InvalidArgument("no command to run (srun [OPTIONS] COMMAND [ARGS...])");
  if (step.nodes > 1) {
    return Status::InvalidArgument("--nodes=" + std::to_string(step.nodes) +
                                   ": an srun called from a job's own processes runs on this node only; call srun "
                                   "from the batch script itself to spread over the job's nodes");
  }
  step.command = i;
  return step;
}

// Starts task `t` of `tasks` (its rank from this node's place in the job) running argv.
pid_t StartTask(char* const* argv, int t, int tasks, int node_id, int node_tasks) {
  const pid_t pid = fork();
  if (pid != 0) return pid;
  for (int sig : {SIGINT, SIGTERM, SIGUSR1, SIGUSR2, SIGHUP}) signal(sig, SIG_DFL);
  const std::string procid = std::to_string(node_id * node_tasks + t), localid = std::to_string(t),
                    count = std::to_string(tasks);
  setenv("SLURM_PROCID", procid.c_str(), 1);
  setenv("SLURM_LOCALID", localid.c_str(), 1);
  setenv("SLURM_STEP_NUM_TASKS", count.c_str(), 1);
  setenv("SLURM_STEP_NUM_NODES", "1", 1);
  if (const char* node = std::getenv("HANGAR_NODE")) setenv("SLURM_STEP_NODELIST", node, 1);
  execvp(argv[0], argv);
  std::fprintf(stderr, "srun: error: %s: %s\n", argv[0], errno == ENOENT ? "command not found" : "cannot run it");
  _exit(errno == ENOENT ? 127 : 126);
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
    const int code = WIFEXITED(status) ? WEXITSTATUS(status) : WIFSIGNALED(status) ? 128 + WTERMSIG(status) : 1;
    worst = std::max(worst, code);
  }
  return worst;
}

}  // namespace

int RunSrunInJob(const std::vector<std::string>& args) {
  if (std::getenv("HANGAR_JOB_ID") == nullptr) {
    return Error("srun launches steps inside a job: put it in a batch script and submit that with sbatch "
                 "(hangar sbatch)");
  }
  StatusOr<Step> step = ParseStep(args);
  if (!step.ok()) return Error(step.status().message());
  const int tasks = step->ntasks > 0 ? step->ntasks : step->per_node > 0 ? step->per_node
                                                                          : EnvInt("SLURM_NTASKS_PER_NODE", 1);
  const int node_id = EnvInt("SLURM_NODEID", 0), node_tasks = EnvInt("SLURM_NTASKS_PER_NODE", 1);
  std::vector<char*> argv;
  for (size_t k = step->command; k < args.size(); ++k) argv.push_back(const_cast<char*>(args[k].c_str()));
  argv.push_back(nullptr);
  struct sigaction forward{};
  forward.sa_handler = Remember;
  sigemptyset(&forward.sa_mask);
  for (int sig : {SIGINT, SIGTERM, SIGUSR1, SIGUSR2, SIGHUP}) sigaction(sig, &forward, nullptr);
  std::vector<pid_t> children;
  for (int t = 0; t < tasks; ++t) {
    const pid_t pid = StartTask(argv.data(), t, tasks, node_id, node_tasks);
    if (pid < 0) return Error("cannot start task " + std::to_string(t) + ": out of processes");
    children.push_back(pid);
  }
  return WaitWorst(children);
}

}  // namespace hangar::cli
