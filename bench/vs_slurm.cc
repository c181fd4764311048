// bench/vs_slurm: Hangar and a real Slurm, one after the other on this machine, given the same job
// stream: 2,000 single-GPU jobs, then (once the cluster is idle again) 2,000 two-node x 8-GPU
// jobs, each running `sleep 1` as a real process. Both clusters are 64 nodes x 8 GPUs under 4
// leaf switches on 127.0.0.1: Hangar is a `hangar controller` and 64 `hangar agent` processes with
// fake GPUs; Slurm is slurmctld and 64 `slurmd -N` (bench/peers/slurm/). One submission per job
// from --clients threads: a POST /v1/jobs each for Hangar, an `sbatch` process each for Slurm.
//
// Every task writes the time it started (`date +%s%N`) into a file named by its job and task; a
// job started when its last task did (for a gang: all its processes run). Printed per system:
//   jobs_started_per_s  jobs / (last job started - first submission sent), per phase; for the
//                       whole stream, all jobs / the sum of the two phases' windows
//   start_p50_ms/p99    job started - the moment its submission was sent (POST written, sbatch
//                       spawned)
//   cpu_s_per_job       the controller's CPU seconds (utime + stime from /proc/PID/stat of
//                       `hangar controller` or slurmctld) from the first submission until every
//                       job has ended, per job
// and the ratios Hangar / Slurm (for latency and CPU: Slurm / Hangar, so > 1 means Hangar wins).
//
// `--stream htc` is the high-throughput stream Slurm's own HTC guide is about instead: --jobs
// (10,000) single-GPU jobs of `/bin/true`, submitted as fast as each system takes them. Besides
// jobs_started_per_s it prints jobs_finished_per_s: jobs / (the moment the system first reports
// none unfinished - first submission), polled every 250 ms. How a job's start is known there
// (--start):
//   own     (the default for htc) each system runs its own kind of job of /bin/true: Hangar
//           executes the argv [/bin/true] itself (no shell), and its job's start is the time
//           Hangar recorded for it (`started_ms`: when the controller heard the task run, which is
//           after the process began); a Slurm job is a batch script, run by a shell, which records
//           its start as in the mixed stream and then runs /bin/true
//   record  (the mixed stream's way, and htc's before 2026-12-05) both run a shell that records
//           the start (`date +%s%N > FILE; true`)
//
//   vs_slurm [--stream mixed|htc] [--start own|record] [--singles 2000] [--gangs 2000] [--jobs
//   10000]
//            [--clients 4] [--sleep 1] [--only hangar|slurm] [--json]
#include <fcntl.h>
#include <httplib.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "common/time.h"

extern char** environ;

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr int kNodes = 64, kGpusPerNode = 8, kLeaves = 4;
const std::string kSlurmScripts = std::string(HANGAR_SOURCE_DIR) + "/bench/peers/slurm";

struct Options {
  int singles = 2000, gangs = 2000, clients = 4, jobs = 10000;
  std::string stream = "mixed";
  std::string sleep = "1";  // "": the task runs `true` (the htc stream)
  std::string only;
  bool json = false;
  bool own_start = false;  // --start own: Hangar runs [/bin/true] and its own record is the start
};

// One kind of job in the stream: `tasks` processes of `gpus` GPUs each, one per node.
struct Shape {
  std::string name;
  int jobs, tasks, gpus;
};

int64_t WallNanos() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// What a task runs once its start is recorded: `sleep N`, or `true` for the htc stream.
std::string Tail(const std::string& sleep) { return sleep.empty() ? "true" : "sleep " + sleep; }

double Pct(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(p * (v.size() - 1) + 0.5))];
}

// CPU seconds of one process from /proc/PID/stat: its own (utime + stime, all threads) and its
// reaped children's (cutime + cstime).
struct ProcCpu {
  double self = 0, children = 0;
};
ProcCpu ReadProcCpu(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string s((std::istreambuf_iterator<char>(in)), {});
  const auto close = s.rfind(')');
  if (close == std::string::npos) return {};
  std::istringstream rest(s.substr(close + 2));
  std::vector<std::string> f{std::istream_iterator<std::string>(rest), {}};
  if (f.size() < 15) return {};
  const double tick = static_cast<double>(sysconf(_SC_CLK_TCK));
  return {(std::stod(f[11]) + std::stod(f[12])) / tick,
          (std::stod(f[13]) + std::stod(f[14])) / tick};
}
double CpuSeconds(pid_t pid) { return ReadProcCpu(pid).self; }

// Where the machine's CPU went, in seconds since boot (differences of two samples are used).
struct CpuSample {
  double controller = 0;  // `hangar controller` or slurmctld
  double nodes = 0;       // the 64 agents or slurmds themselves
  double node_children =
      0;              // what they reaped: Hangar's task processes (slurmstepd is not slurmd's)
  double client = 0;  // this benchmark: its client threads and the sbatch/squeue it ran
  double machine_busy = 0;  // every CPU of the machine, whoever used it
  CpuSample operator-(const CpuSample& o) const {
    return {controller - o.controller, nodes - o.nodes, node_children - o.node_children,
            client - o.client, machine_busy - o.machine_busy};
  }
};

double MachineBusySeconds() {
  std::ifstream in("/proc/stat");
  std::string cpu;
  double v[8] = {0}, busy = 0;
  in >> cpu;
  for (double& x : v) in >> x;
  for (int i = 0; i < 8; ++i) busy += (i == 3 || i == 4) ? 0 : v[i];  // all but idle and iowait
  return busy / static_cast<double>(sysconf(_SC_CLK_TCK));
}

CpuSample SampleCpu(pid_t controller, const std::vector<pid_t>& nodes) {
  CpuSample c;
  c.controller = CpuSeconds(controller);
  for (pid_t p : nodes) {
    const ProcCpu n = ReadProcCpu(p);
    c.nodes += n.self;
    c.node_children += n.children;
  }
  const ProcCpu me = ReadProcCpu(getpid());
  c.client = me.self + me.children;
  c.machine_busy = MachineBusySeconds();
  return c;
}

// Set by SIGINT or SIGTERM: waits end, submissions stop, and everything started is stopped.
std::atomic<bool> g_interrupted{false};

bool WaitFor(const std::function<bool()>& pred, double seconds, int step_ms = 100) {
  const int64_t until = hangar::MonotonicNanos() + static_cast<int64_t>(seconds * 1e9);
  while (hangar::MonotonicNanos() < until && !g_interrupted) {
    if (pred()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(step_ms));
  }
  return pred();
}

// Runs argv (PATH searched) with stdout into *out and stderr into `log`; returns its exit status.
int RunProcess(const std::vector<std::string>& args, std::string* out,
               const std::string& log = "/dev/null") {
  int pipefd[2];
  if (pipe2(pipefd, O_CLOEXEC) != 0) return -1;
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, pipefd[1], 1);
  posix_spawn_file_actions_addopen(&fa, 2, log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  std::vector<char*> argv;
  for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  pid_t pid = 0;
  const int err = posix_spawnp(&pid, argv[0], &fa, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  close(pipefd[1]);
  char buf[4096];
  for (ssize_t n; (n = read(pipefd[0], buf, sizeof buf)) > 0;) {
    if (out) out->append(buf, n);
  }
  close(pipefd[0]);
  if (err != 0) return -1;
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

// A `hangar` process this benchmark started, its output in `log`.
pid_t SpawnHangar(const std::vector<std::string>& args, const std::string& log) {
  std::vector<char*> argv;  // built before fork(): the child only dup2()s and execs
  for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  const pid_t pid = fork();
  if (pid == 0) {
    const int fd = open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    dup2(fd, 1);
    dup2(fd, 2);
    execv(HANGAR_BINARY, argv.data());
    _exit(127);
  }
  return pid;
}

// SIGTERM to each (last started first), SIGKILL to those still there after 10 s; all reaped.
void StopChildren(std::vector<pid_t>& pids) {
  for (auto it = pids.rbegin(); it != pids.rend(); ++it) kill(*it, SIGTERM);
  for (int i = 0; i < 200; ++i) {
    bool any = false;
    for (pid_t& p : pids) {
      if (p > 0 && waitpid(p, nullptr, WNOHANG) == p) p = 0;  // reaped: never signal that PID again
      any = any || p > 0;
    }
    if (!any) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  for (pid_t p : pids) {
    if (p > 0 && kill(p, SIGKILL) == 0) waitpid(p, nullptr, 0);
  }
  pids.clear();
}

// One submission path into one system. Each client thread has its own.
class Submitter {
 public:
  virtual ~Submitter() = default;
  // Submits one job whose tasks record their start under `started_dir`; its id, or none.
  virtual std::optional<uint64_t> Submit(const Shape& shape, const std::string& started_dir) = 0;
};

// A control plane under test: started, fed jobs, asked whether they ended, stopped.
class System {
 public:
  virtual ~System() = default;
  virtual std::string name() const = 0;
  // Starts every process and waits until all nodes can take work; an error sentence or "".
  virtual std::string Start() = 0;
  virtual std::unique_ptr<Submitter> NewSubmitter() = 0;
  // Jobs that have not ended yet; -1 when the system did not answer.
  virtual int Unfinished() = 0;
  // Job id -> when the system itself recorded its start (ns since the epoch), for systems whose
  // tasks do not record it themselves (--start own); empty when the tasks do.
  virtual std::map<uint64_t, int64_t> OwnStarts() { return {}; }
  virtual bool uses_own_starts() const { return false; }
  virtual pid_t controller_pid() const = 0;
  virtual std::vector<pid_t> node_pids() const = 0;
  virtual void Stop() = 0;
};

// ---- Hangar: a controller and 64 agents with fake GPUs.

class HangarSubmitter : public Submitter {
 public:
  HangarSubmitter(int port, std::string sleep, bool own_start)
      : client_("127.0.0.1", port), sleep_(std::move(sleep)), own_start_(own_start) {
    client_.set_keep_alive(true);
    client_.set_tcp_nodelay(true);
    client_.set_read_timeout(60, 0);
  }
  std::optional<uint64_t> Submit(const Shape& shape, const std::string& started_dir) override {
    const std::string command = own_start_ ? "[/bin/true]"
                                           : "\"date +%s%N > " + started_dir +
                                                 "/$HANGAR_JOB_ID.$HANGAR_TASK_INDEX; " +
                                                 Tail(sleep_) + "\"";
    const std::string spec =
        "name: " + shape.name + "\ntasks:\n  - replicas: " + std::to_string(shape.tasks) +
        "\n    gpus: " + std::to_string(shape.gpus) + "\n    command: " + command + "\n";
    auto r = client_.Post("/v1/jobs", spec, "application/yaml");
    if (!r || r->status != 201) return std::nullopt;
    return json::parse(r->body)["id"].get<uint64_t>();
  }

 private:
  httplib::Client client_;
  std::string sleep_;
  bool own_start_;
};

class HangarSystem : public System {
 public:
  HangarSystem(std::string dir, std::string sleep, bool own_start)
      : dir_(std::move(dir)), sleep_(std::move(sleep)), own_start_(own_start) {}
  std::string name() const override { return "hangar"; }
  pid_t controller_pid() const override { return children_.empty() ? 0 : children_[0]; }
  std::vector<pid_t> node_pids() const override {
    return children_.empty() ? std::vector<pid_t>{}
                             : std::vector<pid_t>(children_.begin() + 1, children_.end());
  }
  std::unique_ptr<Submitter> NewSubmitter() override {
    return std::make_unique<HangarSubmitter>(api_, sleep_, own_start_);
  }
  void Stop() override { StopChildren(children_); }

  std::string Start() override {
    fs::create_directories(dir_ + "/logs");
    WriteCluster();
    children_.push_back(
        SpawnHangar({"hangar", "controller", "--cluster", dir_ + "/cluster.yaml", "--api",
                     "127.0.0.1:0", "--agents", "127.0.0.1:0", "--store",
                     "sqlite://" + dir_ + "/state.db", "--port-file", dir_ + "/ports.json",
                     "--checkpoint-root", dir_ + "/checkpoints", "--auth", "none", "--insecure"},
                    dir_ + "/logs/controller.log"));
    if (!WaitFor([&] { return fs::exists(dir_ + "/ports.json"); }, 30)) {
      return "the controller did not start; see " + dir_ + "/logs/controller.log";
    }
    const json ports = json::parse(std::ifstream(dir_ + "/ports.json"));
    api_ = ports["api"];
    const std::string agents = "127.0.0.1:" + std::to_string(ports["agents"].get<int>());
    for (int n = 1; n <= kNodes; ++n) {
      const std::string node = NodeName(n);
      // No cgroups, as the Slurm side runs without them (proctrack/pgid, task/none).
      children_.push_back(SpawnHangar({"hangar", "agent", "--controller", agents, "--node", node,
                                       "--cluster", dir_ + "/cluster.yaml", "--state-dir",
                                       dir_ + "/agents/" + node, "--no-cgroups", "--insecure"},
                                      dir_ + "/logs/agent-" + node + ".log"));
    }
    if (!WaitFor([&] { return AllNodesReady(); }, 120, 250)) {
      return "the 64 agents did not all register and become ready within 120 s; see " + dir_ +
             "/logs/";
    }
    return "";
  }

  // Counted from one-row pages (`more` says how many are left), so that polling it costs the
  // controller little while thousands of jobs are queued.
  int Unfinished() override {
    httplib::Client c("127.0.0.1", api_);
    int n = 0;
    for (const char* state : {"pending", "starting", "running", "preempting"}) {
      auto r = c.Get(std::string("/v1/jobs?limit=1&state=") + state);
      if (!r || r->status != 200) return -1;
      const json page = json::parse(r->body);
      n += static_cast<int>(page["jobs"].size() + page.value("more", 0));
    }
    return n;
  }

  // Each job's start as Hangar recorded it (started_ms, in ns since the epoch), for --start own.
  bool uses_own_starts() const override { return own_start_; }
  std::map<uint64_t, int64_t> OwnStarts() override {
    httplib::Client c("127.0.0.1", api_);
    c.set_read_timeout(60, 0);
    std::map<uint64_t, int64_t> starts;
    std::string cursor;
    for (;;) {
      auto r = c.Get("/v1/jobs?limit=10000" + (cursor.empty() ? "" : "&cursor=" + cursor));
      if (!r || r->status != 200) break;
      const json page = json::parse(r->body);
      for (const auto& j : page["jobs"]) {
        if (j.value("started_ms", int64_t{0}) > 0)
          starts[j["id"].get<uint64_t>()] = j["started_ms"].get<int64_t>() * 1'000'000;
      }
      if (!page["next_cursor"].is_string()) break;
      cursor = page["next_cursor"].get<std::string>();
    }
    return starts;
  }

 private:
  static std::string NodeName(int n) {
    char b[16];
    std::snprintf(b, sizeof b, "n%03d", n);
    return b;
  }

  void WriteCluster() {
    std::ofstream y(dir_ + "/cluster.yaml");
    y << "name: vs-slurm\nnode_defaults: {gpus: " << kGpusPerNode
      << ", gpu_model: H100-SXM-80GB, gpu_memory: 80Gi, cpu: 64, memory: 500Gi, nvlink: node}\n"
      << "fabric:\n  spines:\n    - name: spine-0\n      leaves:\n";
    const int per_leaf = kNodes / kLeaves;
    for (int l = 0; l < kLeaves; ++l) {
      const std::string first = NodeName(l * per_leaf + 1), last = NodeName((l + 1) * per_leaf);
      y << "        - {name: leaf-" << l << ", nodes: [{name: \"n[" << first.substr(1) << "-"
        << last.substr(1) << "]\"}]}\n";
    }
  }

  bool AllNodesReady() {
    httplib::Client c("127.0.0.1", api_);
    c.set_connection_timeout(1, 0);
    auto h = c.Get("/healthz");
    if (!h || h->status != 200 || json::parse(h->body, nullptr, false).value("agents", 0) != kNodes)
      return false;
    auto r = c.Get("/v1/nodes");
    if (!r || r->status != 200) return false;
    int ready = 0;
    const json nodes = json::parse(r->body, nullptr, false);
    if (!nodes.contains("nodes")) return false;
    for (const auto& n : nodes["nodes"]) ready += n.value("state", std::string()) == "ready";
    return ready == kNodes;
  }

  std::string dir_, sleep_;
  bool own_start_;
  std::vector<pid_t> children_;  // the controller first, then the agents
  int api_ = 0;
};

// ---- Slurm: slurmctld and 64 slurmd, set up by bench/peers/slurm/.

class SlurmSubmitter : public Submitter {
 public:
  explicit SlurmSubmitter(std::string sleep) : sleep_(std::move(sleep)) {}
  std::optional<uint64_t> Submit(const Shape& shape, const std::string& started_dir) override {
    const std::string record = "date +%s%N > " + started_dir;
    std::vector<std::string> args = {"sbatch", "--parsable", "--job-name=" + shape.name,
                                     "--output=/dev/null", "--chdir=" + started_dir};
    if (shape.tasks == 1) {
      args.insert(args.end(), {"--ntasks=1", "--gres=gpu:" + std::to_string(shape.gpus),
                               "--wrap=" + record + "/$SLURM_JOB_ID.0; " + Tail(sleep_)});
    } else {
      // The batch script runs on the first node; srun starts one process on each node.
      args.insert(args.end(), {"--nodes=" + std::to_string(shape.tasks),
                               "--gres=gpu:" + std::to_string(shape.gpus), "--exclusive",
                               "--wrap=srun --nodes=" + std::to_string(shape.tasks) +
                                   " --ntasks-per-node=1 sh -c '" + record +
                                   "/$SLURM_JOB_ID.$SLURM_PROCID; " + Tail(sleep_) + "'"});
    }
    std::string out;
    if (RunProcess(args, &out) != 0 || out.empty()) return std::nullopt;
    return std::strtoull(out.c_str(), nullptr, 10);
  }

 private:
  std::string sleep_;
};

class SlurmSystem : public System {
 public:
  SlurmSystem(std::string dir, std::string sleep)
      : dir_(std::move(dir)), sleep_(std::move(sleep)) {}
  std::string name() const override { return "slurm"; }
  std::unique_ptr<Submitter> NewSubmitter() override {
    return std::make_unique<SlurmSubmitter>(sleep_);
  }
  pid_t controller_pid() const override { return ctld_; }
  std::vector<pid_t> node_pids() const override {
    std::vector<pid_t> pids;
    for (const auto& e : fs::directory_iterator(dir_ + "/pids")) {
      pid_t pid = 0;
      if (e.path().filename().string().rfind("slurmd-", 0) == 0 && (std::ifstream(e.path()) >> pid))
        pids.push_back(pid);
    }
    return pids;
  }

  std::string Start() override {
    fs::create_directories(dir_);
    setenv("SLURM_CONF", (dir_ + "/etc/slurm.conf").c_str(), 1);  // for sbatch and squeue
    for (const char* step : {"install.sh", "configure.sh", "start.sh"}) {
      std::string out;
      const std::vector<std::string> args = {kSlurmScripts + "/" + step, dir_};
      if (RunProcess(args, &out, dir_ + "/setup.log") != 0) {
        return std::string("bench/peers/slurm/") + step + " failed; see " + dir_ +
               "/setup.log and " + dir_ + "/log/";
      }
    }
    std::ifstream(dir_ + "/pids/slurmctld") >> ctld_;
    return ctld_ > 0 ? "" : "no slurmctld pid in " + dir_ + "/pids/";
  }

  int Unfinished() override {
    std::string out;
    if (RunProcess({"squeue", "--noheader", "--format=%i"}, &out) != 0) return -1;
    return static_cast<int>(std::count(out.begin(), out.end(), '\n'));
  }

  void Stop() override {
    std::string out;
    if (RunProcess({kSlurmScripts + "/stop.sh", dir_}, &out, dir_ + "/setup.log") != 0) {
      std::fprintf(stderr, "bench/peers/slurm/stop.sh did not stop everything; see %s/setup.log\n",
                   dir_.c_str());
    }
    ctld_ = 0;
  }

 private:
  std::string dir_, sleep_;
  pid_t ctld_ = 0;
};

// ---- The measurement.

struct Phase {
  std::string name;
  int jobs = 0, failed = 0, started = 0;
  double window_s = 0, submit_s = 0, wall_s = 0, cpu_s = 0, machine_busy_pct = 0;
  double finish_window_s = 0;  // first submission until the system first said none was unfinished
  CpuSample used;              // over the phase: first submission until every job has ended
  std::vector<double> latency_ms, submit_ms;  // submit-to-start; submission round trips
  json ToJson() const {
    return {{"jobs", jobs},
            {"refused", failed},
            {"started", started},
            {"jobs_started_per_s", window_s > 0 ? started / window_s : 0},
            {"jobs_finished_per_s", finish_window_s > 0 ? started / finish_window_s : 0},
            {"submitted_per_s", submit_s > 0 ? (jobs - failed) / submit_s : 0},
            {"start_p50_ms", Pct(latency_ms, 0.5)},
            {"start_p99_ms", Pct(latency_ms, 0.99)},
            {"start_max_ms", Pct(latency_ms, 1.0)},
            {"submit_rtt_p50_ms", Pct(submit_ms, 0.5)},
            {"submit_rtt_p99_ms", Pct(submit_ms, 0.99)},
            {"cpu_s_per_job", started > 0 ? cpu_s / started : 0},
            {"window_s", window_s},
            {"machine_cpu_busy_pct", machine_busy_pct},
            {"cpu_s",
             {{"controller", used.controller},
              {"node_daemons", used.nodes},
              {"node_daemons_reaped_children", used.node_children},
              {"benchmark_client", used.client},
              {"machine", used.machine_busy},
              {"machine_wall", wall_s * std::thread::hardware_concurrency()}}}};
  }
};

// Submits shape.jobs jobs from `clients` threads; fills sent[id] = wall time its submission left.
void SubmitAll(System& sys, const Shape& shape, int clients, const std::string& started_dir,
               std::vector<std::pair<uint64_t, int64_t>>* sent, std::vector<double>* rtt_ms,
               int* failed) {
  std::atomic<int> next{0}, refused{0};
  std::mutex mu;
  auto worker = [&] {
    auto submitter = sys.NewSubmitter();
    std::vector<std::pair<uint64_t, int64_t>> mine;
    std::vector<double> rtt;
    while (next.fetch_add(1) < shape.jobs && !g_interrupted) {
      const int64_t before = WallNanos();
      auto id = submitter->Submit(shape, started_dir);
      rtt.push_back((WallNanos() - before) / 1e6);
      if (id)
        mine.emplace_back(*id, before);
      else
        refused++;
    }
    std::lock_guard<std::mutex> l(mu);
    sent->insert(sent->end(), mine.begin(), mine.end());
    rtt_ms->insert(rtt_ms->end(), rtt.begin(), rtt.end());
  };
  std::vector<std::thread> threads;
  for (int i = 0; i < clients; ++i) threads.emplace_back(worker);
  for (auto& t : threads) t.join();
  *failed = refused;
}

// Files in `dir`, counted from the directory alone (no stat: this runs while the system under test
// shares the machine). A file may still be empty here; it is read only once every job has ended.
int CountStartFiles(const std::string& dir) {
  int n = 0;
  for (auto it = fs::directory_iterator(dir); it != fs::directory_iterator(); ++it) ++n;
  return n;
}

Phase RunPhase(System& sys, const Shape& shape, int clients, const std::string& dir) {
  Phase p;
  p.name = shape.name;
  p.jobs = shape.jobs;
  const std::string started_dir = dir + "/started-" + sys.name() + "-" + shape.name;
  fs::create_directories(started_dir);
  std::vector<std::pair<uint64_t, int64_t>> sent;
  const std::vector<pid_t> nodes = sys.node_pids();
  const CpuSample cpu0 = SampleCpu(sys.controller_pid(), nodes);
  const int64_t t0 = hangar::MonotonicNanos();
  SubmitAll(sys, shape, clients, started_dir, &sent, &p.submit_ms, &p.failed);
  p.submit_s = (hangar::MonotonicNanos() - t0) / 1e9;
  const int want = static_cast<int>(sent.size()) * shape.tasks;
  const double patience = 120 + 2.0 * shape.jobs;
  const bool own = sys.uses_own_starts();
  if (!own && !WaitFor([&] { return CountStartFiles(started_dir) >= want; }, patience, 100) &&
      !g_interrupted) {
    std::fprintf(stderr, "%s: only %d of %d %s tasks started within %.0f s\n", sys.name().c_str(),
                 CountStartFiles(started_dir), want, shape.name.c_str(), patience);
  }
  const int64_t first_sent_wall =
      sent.empty() ? WallNanos()
                   : std::min_element(sent.begin(), sent.end(), [](const auto& a, const auto& b) {
                       return a.second < b.second;
                     })->second;
  if (WaitFor([&] { return sys.Unfinished() == 0; }, own ? patience : 120, 250)) {
    p.finish_window_s = (WallNanos() - first_sent_wall) / 1e9;
  }
  const std::map<uint64_t, int64_t> own_starts =
      own ? sys.OwnStarts() : std::map<uint64_t, int64_t>{};
  p.used = SampleCpu(sys.controller_pid(), nodes) - cpu0;
  p.wall_s = (hangar::MonotonicNanos() - t0) / 1e9;
  p.cpu_s = p.used.controller;
  p.machine_busy_pct = 100 * p.used.machine_busy / (p.wall_s * std::thread::hardware_concurrency());
  int64_t first_sent = INT64_MAX, last_start = 0;
  for (const auto& [id, at] : sent) {
    int64_t job_start = 0;
    if (own) {
      const auto it = own_starts.find(id);
      job_start = it == own_starts.end() ? -1 : it->second;
    }
    for (int t = 0; t < shape.tasks && job_start >= 0 && !own; ++t) {
      std::ifstream in(started_dir + "/" + std::to_string(id) + "." + std::to_string(t));
      int64_t v = 0;
      job_start = (in >> v) ? std::max(job_start, v) : -1;
    }
    first_sent = std::min(first_sent, at);
    if (job_start <= 0) continue;
    ++p.started;
    last_start = std::max(last_start, job_start);
    p.latency_ms.push_back((job_start - at) / 1e6);
  }
  p.window_s = last_start > first_sent ? (last_start - first_sent) / 1e9 : 0;
  return p;
}

json Totals(const std::vector<Phase>& phases) {
  Phase all;
  for (const auto& p : phases) {
    all.jobs += p.jobs;
    all.failed += p.failed;
    all.started += p.started;
    all.window_s += p.window_s;
    all.finish_window_s += p.finish_window_s;
    all.submit_s += p.submit_s;
    all.cpu_s += p.cpu_s;
    all.wall_s += p.wall_s;
    all.used = all.used - (CpuSample{} - p.used);
    all.latency_ms.insert(all.latency_ms.end(), p.latency_ms.begin(), p.latency_ms.end());
    all.submit_ms.insert(all.submit_ms.end(), p.submit_ms.begin(), p.submit_ms.end());
  }
  all.machine_busy_pct = all.wall_s > 0 ? 100 * all.used.machine_busy /
                                              (all.wall_s * std::thread::hardware_concurrency())
                                        : 0;
  json j = all.ToJson();
  for (const auto& p : phases) j[p.name] = p.ToJson();
  return j;
}

// PIDs (other than this one) whose command line or environment names `dir`: what is left of
// either system (agents' tasks carry HANGAR_CHECKPOINT_DIR under it; Slurm's, SLURM_CONF).
std::vector<pid_t> ProcessesUnder(const std::string& dir) {
  std::vector<pid_t> pids;
  for (const auto& e : fs::directory_iterator("/proc")) {
    const std::string name = e.path().filename();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    const pid_t pid = std::stoi(name);
    if (pid == getpid()) continue;
    for (const char* f : {"/cmdline", "/environ"}) {
      std::ifstream in("/proc/" + name + f);
      std::string s((std::istreambuf_iterator<char>(in)), {});
      if (s.find(dir) != std::string::npos) {
        pids.push_back(pid);
        break;
      }
    }
  }
  return pids;
}

void PrintFigures(FILE* info, const std::string& who, const json& j) {
  std::fprintf(
      info,
      "%-15s %5d jobs: %6.1f started/s, %6.1f finished/s, submit-to-start p50 %6.0f ms, p99 %6.0f "
      "ms, controller %.2f ms CPU/job (%d started, %d refused; submitted at %.0f/s)\n",
      who.c_str(), j["jobs"].get<int>(), j["jobs_started_per_s"].get<double>(),
      j["jobs_finished_per_s"].get<double>(), j["start_p50_ms"].get<double>(),
      j["start_p99_ms"].get<double>(), 1000 * j["cpu_s_per_job"].get<double>(),
      j["started"].get<int>(), j["refused"].get<int>(), j["submitted_per_s"].get<double>());
  std::fflush(info);
}

json Measure(System& sys, const Options& o, const std::string& dir, FILE* info) {
  std::fprintf(info, "%s: starting %d nodes x %d GPUs...\n", sys.name().c_str(), kNodes,
               kGpusPerNode);
  std::fflush(info);
  double load = 0;  // others' work on a shared machine shows here (and in machine_cpu_busy_pct)
  std::ifstream("/proc/loadavg") >> load;
  const std::string error = sys.Start();
  if (!error.empty()) {
    sys.Stop();
    return {{"error", error}};
  }
  // What the daemons spend with nothing to do (heartbeats, pings), for reading the CPU figures.
  const CpuSample idle0 = SampleCpu(sys.controller_pid(), sys.node_pids());
  std::this_thread::sleep_for(std::chrono::seconds(5));
  const CpuSample idle = SampleCpu(sys.controller_pid(), sys.node_pids()) - idle0;
  std::vector<Phase> phases;
  const std::vector<Shape> stream =
      o.stream == "htc" ? std::vector<Shape>{Shape{"htc", o.jobs, 1, 1}}
                        : std::vector<Shape>{Shape{"single", o.singles, 1, 1},
                                             Shape{"gang", o.gangs, 2, kGpusPerNode}};
  for (const Shape& shape : stream) {
    if (shape.jobs <= 0 || g_interrupted) continue;
    phases.push_back(RunPhase(sys, shape, o.clients, dir));
    const json j = phases.back().ToJson();
    PrintFigures(info, sys.name() + " " + shape.name, j);
  }
  sys.Stop();
  json total = Totals(phases);
  total["loadavg_1m_before"] = load;
  total["idle_cpu_pct"] = {{"controller", 100 * idle.controller / 5},
                           {"node_daemons", 100 * idle.nodes / 5}};
  PrintFigures(info, sys.name() + " all", total);
  return total;
}

Options Parse(int argc, char** argv) {
  Options o;
  std::string start;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const bool has = i + 1 < argc;
    if (a == "--singles" && has)
      o.singles = std::atoi(argv[++i]);
    else if (a == "--gangs" && has)
      o.gangs = std::atoi(argv[++i]);
    else if (a == "--clients" && has)
      o.clients = std::max(1, std::atoi(argv[++i]));
    else if (a == "--jobs" && has)
      o.jobs = std::atoi(argv[++i]);
    else if (a == "--stream" && has)
      o.stream = argv[++i];
    else if (a == "--sleep" && has)
      o.sleep = argv[++i];
    else if (a == "--only" && has)
      o.only = argv[++i];
    else if (a == "--start" && has)
      start = argv[++i];
    else if (a == "--json")
      o.json = true;
    else {
      std::fprintf(stderr,
                   "usage: vs_slurm [--stream mixed|htc] [--start own|record] [--singles N] "
                   "[--gangs N] [--jobs N] [--clients C] "
                   "[--sleep SECONDS] [--only hangar|slurm] [--json]\n");
      std::exit(2);
    }
  }
  if (o.stream != "mixed" && o.stream != "htc") {
    std::fprintf(stderr,
                 "vs_slurm: --stream is mixed (singles, then gangs) or htc (--jobs single-GPU jobs "
                 "of true), not '%s'\n",
                 o.stream.c_str());
    std::exit(2);
  }
  if (o.stream == "htc") o.sleep = "";
  if (start.empty()) start = o.stream == "htc" ? "own" : "record";
  if (start != "own" && start != "record") {
    std::fprintf(stderr,
                 "vs_slurm: --start is own (Hangar runs /bin/true and its own record is the start) "
                 "or record "
                 "(every task's shell records its start), not '%s'\n",
                 start.c_str());
    std::exit(2);
  }
  if (start == "own" && o.stream != "htc") {
    std::fprintf(stderr,
                 "vs_slurm: --start own is for --stream htc (the mixed stream's tasks sleep after "
                 "recording their start)\n");
    std::exit(2);
  }
  o.own_start = start == "own";
  if (!o.sleep.empty() && o.sleep.find_first_not_of("0123456789.") != std::string::npos) {
    std::fprintf(stderr, "vs_slurm: --sleep takes seconds, e.g. 1 or 0.5, not '%s'\n",
                 o.sleep.c_str());
    std::exit(2);
  }
  return o;
}

json Ratios(const json& h, const json& s) {
  auto ratio = [](double a, double b) { return b > 0 ? a / b : 0.0; };
  json r = {{"jobs_started_per_s", ratio(h["jobs_started_per_s"], s["jobs_started_per_s"])},
            {"jobs_finished_per_s", ratio(h["jobs_finished_per_s"], s["jobs_finished_per_s"])},
            {"start_p50_ms", ratio(s["start_p50_ms"], h["start_p50_ms"])},
            {"start_p99_ms", ratio(s["start_p99_ms"], h["start_p99_ms"])},
            {"cpu_s_per_job", ratio(s["cpu_s_per_job"], h["cpu_s_per_job"])}};
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  const Options o = Parse(argc, argv);
  signal(SIGPIPE, SIG_IGN);
  signal(SIGINT, [](int) { g_interrupted = true; });
  signal(SIGTERM, [](int) { g_interrupted = true; });
  char tmpl[] = "/tmp/hangar-vs-slurm-XXXXXX";
  const std::string dir = mkdtemp(tmpl);
  json out = {{"stream", o.stream},   {"start", o.own_start ? "own" : "record"},
              {"clients", o.clients}, {"sleep_s", o.sleep.empty() ? 0.0 : std::stod(o.sleep)},
              {"nodes", kNodes},      {"gpus_per_node", kGpusPerNode}};
  bool ok = true;
  for (const std::string name : {"hangar", "slurm"}) {
    if ((!o.only.empty() && o.only != name) || g_interrupted) continue;
    std::unique_ptr<System> sys;
    if (name == "hangar")
      sys = std::make_unique<HangarSystem>(dir + "/hangar", o.sleep, o.own_start);
    else
      sys = std::make_unique<SlurmSystem>(dir + "/slurm", o.sleep);
    out[name] = Measure(*sys, o, dir, o.json ? stderr : stdout);
    if (out[name].contains("error")) {
      std::fprintf(stderr, "%s: %s\n", name.c_str(), out[name]["error"].get<std::string>().c_str());
      ok = false;
    }
  }
  if (o.stream == "htc")
    out["jobs"] = o.jobs;
  else
    out.update({{"singles", o.singles}, {"gangs", o.gangs}});
  if (ok && out.contains("hangar") && out.contains("slurm")) {
    out["ratio"] = Ratios(out["hangar"], out["slurm"]);
    for (const char* phase : {"single", "gang", "htc"}) {
      if (out["hangar"].contains(phase) && out["slurm"].contains(phase)) {
        out["ratio"][phase] = Ratios(out["hangar"][phase], out["slurm"][phase]);
      }
    }
  }
  // Everything either system started must be gone; what is not, is killed and reported.
  std::vector<pid_t> left;
  WaitFor([&] { return (left = ProcessesUnder(dir)).empty(); }, 10, 200);
  for (pid_t p : left) kill(p, SIGKILL);
  out["left_running"] = left.size();
  if (!left.empty())
    std::fprintf(stderr, "vs_slurm: %zu processes outlived their system and were killed\n",
                 left.size());
  if (!std::getenv("HANGAR_KEEP_BENCH_DIR")) fs::remove_all(dir);
  if (o.json) {
    std::printf("%s\n", out.dump(2).c_str());
  } else if (out.contains("ratio")) {
    const json& r = out["ratio"];
    std::printf(
        "Hangar / Slurm: %.1fx jobs started and %.1fx finished per second, p50 %.1fx and p99 %.1fx "
        "lower submit-to-start, %.1fx less controller CPU per job\n",
        r["jobs_started_per_s"].get<double>(), r["jobs_finished_per_s"].get<double>(),
        r["start_p50_ms"].get<double>(), r["start_p99_ms"].get<double>(),
        r["cpu_s_per_job"].get<double>());
  }
  return ok && left.empty() && !g_interrupted ? 0 : 1;
}
