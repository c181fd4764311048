#include "controller/dev_command.h"

#include <fcntl.h>
#include <httplib.h>
#include <signal.h>
#include <spdlog/spdlog.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "cluster/cluster_yaml.h"
#include "common/dev_token.h"
#include "common/net.h"
#include "common/time.h"
#include "controller/service/dev_load_balancer.h"
#include "job/job_state.h"

namespace hangar::controller {
namespace {

namespace fs = std::filesystem;

// What `hangar dev` runs when no --cluster is given: 4 nodes x 8 GPUs under two leaf switches.
constexpr const char* kDefaultCluster =
    R"(# The default `hangar dev` cluster: 4 nodes x 8 GPUs on two leaf switches.
name: dev
node_defaults: {gpus: 8, gpu_model: H100-SXM-80GB, gpu_memory: 80Gi, cpu: 64, memory: 512Gi, nvlink: node, numa_nodes: 2, rails: 8}
fabric:
  spines:
    - name: spine-0
      leaves:
        - {name: leaf-0, nodes: [{name: "node-[1-2]", rack: rack-0}]}
        - {name: leaf-1, nodes: [{name: "node-[3-4]", rack: rack-1}]}
)";

struct Flags {
  std::string cluster;
  std::string dir = "./hangar-dev";
  int port = 8080;
  std::string submit_dir;
  bool exit_when_done = false;
  std::string heartbeat_timeout = "3s";
  bool registry = false;  // also run a loopback docker-registry on port + 2 (docs/containers.md)
  bool tls =
      false;  // HTTPS and mutual TLS, with a CA of its own under DIR/tls (docs/operations.md)
  bool allow_maintenance_commands = false;  // the agents run `hangar maintain`'s commands
};

std::atomic<bool> g_stop{false};

// Longest wait for the controller to answer: restoring a store with many jobs takes a while, and
// a controller that dies is noticed at once anyway.
constexpr Duration kStartupLimit = 120 * kSecond;
constexpr int kLogGenerations = 5;  // controller.log.1 .. .5 kept from earlier runs

// Moves `path` to `path`.1 (and .1 to .2, ...), so a restart keeps the previous run's log.
void RotateLog(const std::string& path) {
  std::error_code ec;
  if (!fs::exists(path, ec)) return;
  fs::remove(path + "." + std::to_string(kLogGenerations), ec);
  for (int i = kLogGenerations - 1; i >= 1; --i) {
    const std::string from = path + "." + std::to_string(i);
    if (fs::exists(from, ec)) fs::rename(from, path + "." + std::to_string(i + 1), ec);
  }
  fs::rename(path, path + ".1", ec);
}

// Starts `hangar ARGS...` (this binary) in a process group of its own, its output appended to
// `log`.
pid_t ForkHangar(const std::vector<std::string>& args, const std::string& log) {
  pid_t pid = fork();
  if (pid != 0) return pid;
  int fd = open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
  if (fd >= 0) {
    dup2(fd, 1);
    dup2(fd, 2);
  }
  setpgid(0, 0);  // Ctrl-C goes to `hangar dev`, which stops its children in order
  // However `hangar dev` ends (SIGKILL, a crash), its children end with it: SIGTERM makes an
  // agent stop its tasks (--stop-tasks-on-exit) and the controller close its store.
  prctl(PR_SET_PDEATHSIG, SIGTERM);
  if (getppid() == 1) _exit(0);  // `hangar dev` died before prctl took hold
  std::vector<char*> argv;
  for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  execv("/proc/self/exe", argv.data());
  _exit(127);
}

pid_t Spawn(const std::vector<std::string>& args, const std::string& log) {
  RotateLog(log);
  return ForkHangar(args, log);
}

// Runs `hangar ARGS...` to its end, its output appended to `log`.
Status RunToEnd(const std::vector<std::string>& args, const std::string& log) {
  const pid_t pid = ForkHangar(args, log);
  int status = 0;
  waitpid(pid, &status, 0);
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return Status::Ok();
  std::string what;
  for (const auto& a : args) what += (what.empty() ? "" : " ") + a;
  return Status::Unavailable("`" + what + "` failed; see " + log);
}

// --tls: the dev cluster's own CA under DIR/tls, made on the first run and kept; the controller's
// certificate (127.0.0.1) and every node's, issued again each run (the cluster may have changed).
Status PrepareTls(const std::string& dir, const std::string& cluster_path) {
  const std::string tls = dir + "/tls", log = dir + "/logs/certs.log";
  std::error_code ec;
  if (!fs::exists(tls + "/ca.key", ec)) {
    HANGAR_RETURN_IF_ERROR(
        RunToEnd({"hangar", "certs", "init", "--dir", tls, "--name", "Hangar dev CA"}, log));
  }
  HANGAR_RETURN_IF_ERROR(RunToEnd({"hangar", "certs", "issue", "--controller", "--dir", tls}, log));
  return RunToEnd({"hangar", "certs", "issue", "--nodes-of", cluster_path, "--dir", tls}, log);
}

// SIGTERM to each, then SIGKILL to those still there after `grace`.
void StopGroup(const std::vector<pid_t>& pids, Duration grace) {
  for (pid_t p : pids) kill(p, SIGTERM);
  std::vector<pid_t> left = pids;
  for (Duration waited = 0; !left.empty() && waited < grace; waited += 50) {
    std::erase_if(left, [](pid_t p) { return waitpid(p, nullptr, WNOHANG) != 0; });
    if (!left.empty()) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  for (pid_t p : left) kill(p, SIGKILL);
  for (pid_t p : left) waitpid(p, nullptr, 0);
}

// Stops the services' HAProxy and removes its runtime API socket, which for a deep folder is a
// file of its own under /tmp (dev_load_balancer.cc) that would otherwise stay behind.
void StopLoadBalancer(const service::DevLoadBalancer& lb) {
  StopGroup({lb.pid}, 2 * kSecond);
  if (lb.layout.admin.rfind("unix:", 0) == 0) {
    std::error_code ec;
    fs::remove(lb.layout.admin.substr(5), ec);
  }
}

// Agents first (they stop their tasks: SIGTERM, SIGKILL after 2 s), then the controller, so that
// it still hears how the tasks ended.
void StopAll(pid_t controller, const std::vector<pid_t>& agents) {
  StopGroup(agents, 5 * kSecond);
  StopGroup({controller}, 5 * kSecond);
}

struct JobTally {
  bool all_ended = false;
  int not_succeeded = 0;
};

// Prints new events and tallies how the submitted jobs stand.
// Events from before `since_ms` (an earlier run's, restored with the store) are not printed: they
// would read as if they were happening now.
JobTally Feed(httplib::Client& api, int64_t* last_event, const std::vector<uint64_t>& jobs,
              int64_t since_ms) {
  auto r = api.Get("/v1/events?limit=200");
  if (r && r->status == 200) {
    auto events = nlohmann::json::parse(r->body, nullptr, false)["events"];
    for (auto it = events.rbegin(); it != events.rend(); ++it) {
      if ((*it)["id"].get<int64_t>() <= *last_event) continue;
      *last_event = (*it)["id"].get<int64_t>();
      if ((*it)["time_ms"].get<int64_t>() < since_ms) continue;
      std::printf("%s  %-12s %s\n",
                  hangar::FormatUtcTimestamp((*it)["time_ms"].get<int64_t>()).substr(11, 8).c_str(),
                  (*it)["subject"].get<std::string>().c_str(),
                  (*it)["message"].get<std::string>().c_str());
    }
    std::fflush(stdout);
  }
  JobTally t;
  t.all_ended = true;
  for (uint64_t id : jobs) {
    auto j = api.Get("/v1/jobs/" + std::to_string(id));
    if (!j || j->status != 200) return JobTally{};
    std::string state = nlohmann::json::parse(j->body, nullptr, false).value("state", "");
    const auto parsed = hangar::job::ParseJobState(state);
    t.all_ended = t.all_ended && parsed && hangar::job::IsFinal(*parsed);
    if (parsed && hangar::job::IsFinal(*parsed) && state != "succeeded") ++t.not_succeeded;
  }
  return t;
}

// The server's error sentence from an API error body, else the body itself.
std::string ErrorSentence(const httplib::Result& r) {
  if (!r) return "no answer from the controller (" + httplib::to_string(r.error()) + ")";
  auto j = nlohmann::json::parse(r->body, nullptr, false);
  if (!j.is_discarded() && j.contains("error") && j["error"].is_object()) {
    return j["error"].value("message", r->body);
  }
  return "HTTP " + std::to_string(r->status) + ": " + r->body;
}

// Jobs the store holds (1 or more: "some"), or 0; -1 when the API does not answer.
int64_t JobsInStore(httplib::Client& api) {
  auto r = api.Get("/v1/jobs?limit=1");
  if (!r || r->status != 200) return -1;
  auto j = nlohmann::json::parse(r->body, nullptr, false);
  if (j.is_discarded() || !j.contains("jobs")) return -1;
  const bool more = j.contains("more") && j["more"].is_number() && j["more"].get<int64_t>() > 0;
  return static_cast<int64_t>(j["jobs"].size()) + (more ? 1 : 0);
}

// The folder of this binary when `hangar` on PATH is not this binary ("" when it is), so the
// banner's commands work as printed.
std::string CliNotOnPath() {
  std::error_code ec;
  const fs::path self = fs::canonical("/proc/self/exe", ec);
  if (ec) return "";
  const char* path = std::getenv("PATH");
  std::stringstream dirs(path ? path : "");
  for (std::string d; std::getline(dirs, d, ':');) {
    if (d.empty()) continue;
    const fs::path found = fs::canonical(fs::path(d) / "hangar", ec);
    if (!ec) return found == self ? "" : self.parent_path().string();
  }
  return self.parent_path().string();
}

struct Submitted {
  std::vector<uint64_t> ids;
  int refused = 0;
};

Submitted SubmitExamples(httplib::Client& api, const std::string& dir) {
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(dir)) {
    if (e.path().extension() == ".yaml") files.push_back(e.path());
  }
  std::sort(files.begin(), files.end());
  Submitted out;
  for (const auto& f : files) {
    std::ifstream in(f);
    std::stringstream ss;
    ss << in.rdbuf();
    auto r = api.Post("/v1/jobs", ss.str(), "application/yaml");
    if (r && r->status == 201) {
      out.ids.push_back(nlohmann::json::parse(r->body)["id"].get<uint64_t>());
      std::printf("submitted %s as job %llu\n", f.filename().c_str(),
                  static_cast<unsigned long long>(out.ids.back()));
    } else {
      ++out.refused;
      std::printf("could not submit %s: %s\n", f.filename().c_str(), ErrorSentence(r).c_str());
    }
  }
  std::fflush(stdout);
  return out;
}

// Waits until the API answers with every agent connected. Gives up when the controller exits, on
// Ctrl-C, or after kStartupLimit; says so once if it takes long (a big store restores slowly).
Status WaitUntilUp(httplib::Client& client, pid_t controller, size_t nodes,
                   const std::string& dir) {
  const Time start = SystemClock::Default()->Now();
  bool noted = false;
  while (!g_stop) {
    auto r = client.Get("/healthz");
    if (r && r->status == 200 &&
        nlohmann::json::parse(r->body, nullptr, false).value("agents", 0) ==
            static_cast<int>(nodes)) {
      return Status::Ok();
    }
    int status = 0;
    if (waitpid(controller, &status, WNOHANG) == controller) {
      return Status::Unavailable("the controller exited (" +
                                 (WIFEXITED(status)
                                      ? "status " + std::to_string(WEXITSTATUS(status))
                                      : "signal " + std::to_string(WTERMSIG(status))) +
                                 ") before it came up; see " + dir + "/logs/controller.log");
    }
    const Duration waited = SystemClock::Default()->Now() - start;
    if (waited > kStartupLimit) {
      return Status::Unavailable("the local cluster did not come up within " +
                                 std::to_string(kStartupLimit / kSecond) + " s; see " + dir +
                                 "/logs/");
    }
    if (!noted && waited > 10 * kSecond) {
      std::printf(
          "still waiting for the controller (%s); it may be restoring a large store: see "
          "%s/logs/controller.log\n",
          r ? "agents connecting" : "not answering yet", dir.c_str());
      std::fflush(stdout);
      noted = true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return Status::Ok();  // Ctrl-C: the caller stops what it started
}

// Makes --dir absolute (the controller and agents pass paths under it to tasks, which run in
// directories of their own: HANGAR_CHECKPOINT_DIR, HANGAR_AGENT_STATE_DIR), creates it, writes
// the default cluster.yaml when none is given, and checks the ports. Returns the cluster path.
StatusOr<std::string> Prepare(Flags& f) {
  std::error_code ec;
  const fs::path dir = fs::absolute(f.dir, ec).lexically_normal();
  if (ec) return Status::InvalidArgument("--dir " + f.dir + ": " + ec.message());
  f.dir = dir.has_filename() ? dir.string() : dir.parent_path().string();  // no trailing '/'
  fs::create_directories(f.dir + "/logs", ec);
  if (ec) return Status::Unavailable("cannot create " + f.dir + ": " + ec.message());
  std::string cluster_path = f.cluster;
  if (cluster_path.empty()) {
    cluster_path = f.dir + "/cluster.yaml";
    // Container jobs may mount, and file:// artifacts be read from, what lies under the dev folder.
    std::ofstream(cluster_path) << kDefaultCluster << "containers: {mounts_allowed: [\"" << f.dir
                                << "\"]}\n"
                                << "data: {file_roots: [\"" << f.dir << "\"]}\n";
  }
  if (f.port < 1 || f.port > 65534) {
    return Status::InvalidArgument("--port " + std::to_string(f.port) +
                                   " is not a port the API can use: give 1-65534 (the agents take "
                                   "the next one)");
  }
  std::vector<int> ports = {f.port, f.port + 1};
  if (f.registry) ports.push_back(f.port + 2);
  for (int p : ports) {  // refuse early and clearly when a port is taken
    if (!PortIsFree("127.0.0.1", p)) {
      return Status::Unavailable(
          "port " + std::to_string(p) +
          " on 127.0.0.1 is in use (another hangar dev or controller?); choose another "
          "with --port, or find what holds it (`ss -ltnp 'sport = :" +
          std::to_string(p) +
          "'`; a previous run's processes: `pgrep -af 'hangar (dev|controller|agent)'`) and stop "
          "it "
          "(`pkill -f 'hangar (dev|controller|agent) '`)");
    }
  }
  return fs::absolute(cluster_path, ec).string();
}

struct LocalProcesses {
  pid_t controller = 0;
  std::vector<pid_t> agents;
  pid_t registry = 0;
};

// Debian's docker-registry on 127.0.0.1:port, its storage under `dir`/registry. Agents pull
// from loopback registries without TLS.
StatusOr<pid_t> StartRegistry(const std::string& dir, int port) {
  std::error_code ec;
  fs::create_directories(dir + "/registry", ec);
  const std::string conf = dir + "/registry/config.yml";
  std::ofstream(conf)
      << "version: 0.1\nlog: {level: warn}\nstorage:\n  filesystem:\n    rootdirectory: " << dir
      << "/registry/storage\n  delete: {enabled: true}\nhttp:\n  addr: 127.0.0.1:" << port << "\n";
  const std::string log = dir + "/logs/registry.log";
  RotateLog(log);
  pid_t pid = fork();
  if (pid == 0) {
    int fd = open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (fd >= 0) dup2(fd, 1), dup2(fd, 2);
    setpgid(0, 0);
    prctl(PR_SET_PDEATHSIG, SIGTERM);  // it ends with `hangar dev`, however that ends
    execlp("docker-registry", "docker-registry", "serve", conf.c_str(), nullptr);
    std::fprintf(stderr, "cannot run docker-registry: %s\n", std::strerror(errno));
    _exit(127);
  }
  httplib::Client c("127.0.0.1", port);
  for (int i = 0; i < 100; ++i) {
    if (waitpid(pid, nullptr, WNOHANG) == pid) {
      return Status::FailedPrecondition("docker-registry did not start (see " + log +
                                        "); install it: scripts/install-deps.sh --containers");
    }
    if (auto r = c.Get("/v2/"); r && r->status == 200) return pid;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  kill(pid, SIGKILL);
  waitpid(pid, nullptr, 0);
  return Status::Unavailable("docker-registry did not answer on 127.0.0.1:" + std::to_string(port) +
                             "; see " + log);
}

LocalProcesses StartProcesses(const Flags& f, const std::string& cluster_path,
                              const cluster::Topology& topology,
                              const std::vector<std::string>& services) {
  const std::string api = "127.0.0.1:" + std::to_string(f.port);
  const std::string agents = "127.0.0.1:" + std::to_string(f.port + 1);
  // --insecure: plaintext, on loopback only; --tls: the certificates PrepareTls made.
  const std::vector<std::string> transport =
      f.tls ? std::vector<std::string>{"--tls-dir", f.dir + "/tls"}
            : std::vector<std::string>{"--insecure"};
  LocalProcesses p;
  std::vector<std::string> controller = {"hangar",
                                         "controller",
                                         "--cluster",
                                         cluster_path,
                                         "--api",
                                         api,
                                         "--agents",
                                         agents,
                                         "--store",
                                         "sqlite://" + f.dir + "/state.db",
                                         "--heartbeat-timeout",
                                         f.heartbeat_timeout,
                                         "--checkpoint-root",
                                         f.dir + "/checkpoints",
                                         "--auth",
                                         "dev",
                                         "--admin-token-file",
                                         f.dir + "/dev-token"};
  controller.insert(controller.end(), transport.begin(), transport.end());
  // The overview's charts fill in minutes on a laptop's short-lived cluster, not hours.
  for (const char* a : {"--history-interval", "10s"}) controller.push_back(a);
  controller.insert(controller.end(), services.begin(), services.end());
  p.controller = Spawn(controller, f.dir + "/logs/controller.log");
  // --stop-tasks-on-exit: stopping `hangar dev` leaves no task behind. --scratch-dir: each node's
  // "local NVMe", drained to checkpoints/. --data-address: each node serves its
  // artifact cache to the others on a free loopback port.
  for (const auto& n : topology.nodes()) {
    std::vector<std::string> agent = {"hangar",
                                      "agent",
                                      "--controller",
                                      agents,
                                      "--node",
                                      n.name,
                                      "--cluster",
                                      cluster_path,
                                      "--state-dir",
                                      f.dir + "/agents/" + n.name,
                                      "--scratch-dir",
                                      f.dir + "/scratch/" + n.name,
                                      "--data-address",
                                      "127.0.0.1:0",
                                      "--stop-tasks-on-exit"};
    agent.insert(agent.end(), transport.begin(), transport.end());
    if (f.allow_maintenance_commands) agent.push_back("--allow-maintenance-commands");
    p.agents.push_back(Spawn(agent, f.dir + "/logs/agent-" + n.name + ".log"));
  }
  return p;
}

// This run's token (dev_token.h): in DIR/dev-token for the controller and for people, and in the
// record by port that this account's CLI finds; the record goes when `hangar dev` ends.
class RunToken {
 public:
  static StatusOr<std::unique_ptr<RunToken>> Make(const Flags& f) {
    auto t =
        std::unique_ptr<RunToken>(new RunToken(f.port, dev_token::Make(), f.dir + "/dev-token"));
    HANGAR_RETURN_IF_ERROR(dev_token::WritePrivateFile(t->file_, t->token_ + "\n"));
    t->recorded_ = dev_token::WriteRecord(f.port, t->token_, getpid());
    return t;
  }
  ~RunToken() { dev_token::RemoveRecord(port_, getpid()); }
  const std::string& token() const { return token_; }
  const std::string& file() const { return file_; }
  const Status& recorded() const { return recorded_; }

 private:
  RunToken(int port, std::string token, std::string file)
      : port_(port), token_(std::move(token)), file_(std::move(file)) {}
  int port_;
  std::string token_, file_;
  Status recorded_;
};

Status Run(const Flags& flags) {
  Flags f = flags;
  HANGAR_ASSIGN_OR_RETURN(const std::string cluster_path, Prepare(f));
  HANGAR_ASSIGN_OR_RETURN(const std::unique_ptr<RunToken> token, RunToken::Make(f));
  HANGAR_ASSIGN_OR_RETURN(auto cluster, cluster::LoadClusterFile(cluster_path));
  signal(SIGINT, [](int) { g_stop = true; });
  signal(SIGTERM, [](int) { g_stop = true; });
  signal(SIGHUP, [](int) { g_stop = true; });
  // Output piped through `tee`: Ctrl-C ends tee too, and the next line written would kill
  // `hangar dev` with SIGPIPE before it stopped anything. A write to a closed pipe fails instead.
  signal(SIGPIPE, SIG_IGN);
  const int64_t started_ms = SystemClock::Default()->Now();
  if (f.tls) HANGAR_RETURN_IF_ERROR(PrepareTls(f.dir, cluster_path));
  pid_t registry = 0;
  if (f.registry) {
    HANGAR_ASSIGN_OR_RETURN(registry, StartRegistry(f.dir, f.port + 2));
  }
  // Services' load balancer (docs/services.md): HAProxy on free loopback ports, when installed.
  HANGAR_ASSIGN_OR_RETURN(const service::DevLoadBalancer lb,
                          service::StartDevLoadBalancer(f.dir, 8));
  std::vector<std::string> services;
  if (lb.pid)
    services = {"--service-lb", service::FormatLbLayout(lb.layout), "--service-ports-local"};
  const LocalProcesses procs = StartProcesses(f, cluster_path, *cluster.topology, services);
  const std::string api = "127.0.0.1:" + std::to_string(f.port);
  const std::string url = (f.tls ? "https://" : "http://") + api;
  httplib::Client client(url);
  client.set_default_headers({{"Authorization", "Bearer " + token->token()}});
  if (f.tls) {
    client.set_ca_cert_path(f.dir + "/tls/ca.crt");
    client.enable_server_certificate_verification(true);
  }
  client.set_connection_timeout(1, 0);
  if (Status up = WaitUntilUp(client, procs.controller, cluster.topology->nodes().size(), f.dir);
      !up.ok() || g_stop) {
    StopAll(procs.controller, procs.agents);
    if (registry) StopGroup({registry}, 2 * kSecond);
    if (lb.pid) StopLoadBalancer(lb);
    return up;
  }
  const std::string on_path = CliNotOnPath();
  const std::string exports = "export HANGAR_URL=" + url +
                              (f.tls ? " HANGAR_CA=" + f.dir + "/tls/ca.crt" : "") +
                              (on_path.empty() ? "" : " PATH=" + on_path + ":$PATH");
  std::printf(
      "\nHangar dev cluster '%s' is up: %zu nodes, %lld GPUs, store %s/state.db\n"
      "  API:   %s   (%s)   dashboard: %s/\n"
      "%s"
      "  try:   hangar nodes;  hangar submit examples/jobs/notebook.yaml;  hangar jobs;  hangar "
      "logs 1\n"
      "  logs:  %s/logs/      stop: Ctrl-C\n",
      cluster.topology->name().c_str(), cluster.topology->nodes().size(),
      static_cast<long long>(cluster.topology->total_gpus()), f.dir.c_str(), url.c_str(),
      exports.c_str(), url.c_str(),
      on_path.empty()
          ? ""
          : ("  CLI:   " + on_path + "/hangar is not on PATH: the export above adds it\n").c_str(),
      f.dir.c_str());
  // The token itself is never printed: this output is often kept in a file others may read.
  std::printf(
      "  token: %s   (this account's CLI finds it by itself; curl: -H \"Authorization: Bearer "
      "$(cat %s)\"; "
      "the dashboard asks for it)\n\n",
      token->file().c_str(), token->file().c_str());
  if (!token->recorded().ok()) {
    std::printf(
        "  note:  the CLI cannot find the token by itself (%s): export HANGAR_TOKEN_FILE=%s\n\n",
        token->recorded().message().c_str(), token->file().c_str());
  }
  if (f.tls) {
    std::printf(
        "  TLS:   HTTPS on the API and mutual TLS to the agents; the CA and certificates are in "
        "%s/tls\n\n",
        f.dir.c_str());
  }
  if (registry) {
    std::printf(
        "  registry: 127.0.0.1:%d (loopback, no TLS); build and push the example image with\n"
        "            examples/containers/push-busybox.sh 127.0.0.1:%d, then hangar submit "
        "examples/containers/hello.yaml\n\n",
        f.port + 2, f.port + 2);
  }
  if (lb.pid) {
    std::printf(
        "  services: endpoints on 127.0.0.1:%d-%d (HAProxy); hangar service create -f "
        "examples/services/echo.yaml\n\n",
        lb.layout.first_port, lb.layout.first_port + lb.layout.slots - 1);
  } else {
    std::printf("  note:  %s\n\n", lb.note.c_str());
  }
  std::fflush(stdout);
  Submitted submitted;
  if (!f.submit_dir.empty()) {
    // A restart restores the store: the examples it holds are not submitted a second time.
    const int64_t held = JobsInStore(client);
    if (held > 0) {
      std::printf(
          "the store holds %lld job(s) from an earlier run: not submitting %s again "
          "(start with an empty --dir, or remove %s/state.db, for a fresh cluster)\n",
          static_cast<long long>(held), f.submit_dir.c_str(), f.dir.c_str());
    } else {
      submitted = SubmitExamples(client, f.submit_dir);
    }
  }
  int64_t last_event = 0;
  JobTally tally;
  while (!g_stop) {
    tally = Feed(client, &last_event, submitted.ids, started_ms);
    if (f.exit_when_done && tally.all_ended) {
      Feed(client, &last_event, {},
           started_ms);  // the events of the last job's end, above the verdict
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
  }
  std::printf("\nstopping the local cluster...\n");
  std::fflush(stdout);
  StopAll(procs.controller, procs.agents);
  if (registry) StopGroup({registry}, 2 * kSecond);
  if (lb.pid) StopLoadBalancer(lb);
  if (f.exit_when_done && (submitted.refused > 0 || tally.not_succeeded > 0)) {
    return Status::FailedPrecondition(
        std::to_string(submitted.refused) + " example(s) refused and " +
        std::to_string(tally.not_succeeded) + " job(s) failed or cancelled, of " +
        std::to_string(submitted.refused + submitted.ids.size()) +
        " submitted; see the lines above and " + f.dir + "/logs/");
  }
  return Status::Ok();
}

}  // namespace

void RegisterDevCommand(CLI::App& app, int* rc) {
  auto f = std::make_shared<Flags>();
  CLI::App* c = app.add_subcommand(
      "dev", "Run a whole local cluster: a controller and agents with fake GPUs");
  c->add_option("--cluster", f->cluster, "cluster.yaml (default: 4 nodes x 8 GPUs on two leaves)");
  c->add_option("--dir", f->dir, "Where the store, logs and task files go")->capture_default_str();
  c->add_option("--port", f->port, "API port on 127.0.0.1 (agents use the next one)")
      ->capture_default_str();
  c->add_option("--submit-examples", f->submit_dir, "Submit every .yaml job spec in this folder");
  c->add_flag("--exit-when-done", f->exit_when_done, "Stop once the submitted jobs have ended");
  c->add_flag("--registry", f->registry,
              "Also run a container registry (docker-registry) on 127.0.0.1, port --port + 2, for "
              "container jobs");
  c->add_option("--heartbeat-timeout", f->heartbeat_timeout, "Node lost after this silence")
      ->capture_default_str();
  c->add_flag("--tls", f->tls,
              "HTTPS on the API and mutual TLS to the agents, with a CA of its own in DIR/tls "
              "(instead of plaintext)");
  c->add_flag("--allow-maintenance-commands", f->allow_maintenance_commands,
              "Start the agents with --allow-maintenance-commands (`hangar maintain`, "
              "docs/maintenance.md)");
  c->callback([f, rc] {
    Status s = Run(*f);
    if (!s.ok()) {
      std::fprintf(stderr, "hangar dev: %s\n", s.message().c_str());
      *rc = 2;
    }
  });
}

}  // namespace hangar::controller
