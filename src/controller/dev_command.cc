#include "controller/dev_command.h"

#include <fcntl.h>
#include <httplib.h>
#include <signal.h>
#include <spdlog/spdlog.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "cluster/cluster_yaml.h"
#include "common/net.h"
#include "common/time.h"

namespace hangar::controller {
namespace {

namespace fs = std::filesystem;

// What `hangar dev` runs when no --cluster is given: 4 nodes x 8 GPUs under two leaf switches.
constexpr const char* kDefaultCluster = R"(# The default `hangar dev` cluster: 4 nodes x 8 GPUs on two leaf switches.
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
};

std::atomic<bool> g_stop{false};

pid_t Spawn(const std::vector<std::string>& args, const std::string& log) {
  pid_t pid = fork();
  if (pid != 0) return pid;
  int fd = open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd >= 0) {
    dup2(fd, 1);
    dup2(fd, 2);
  }
  setpgid(0, 0);  // Ctrl-C goes to `hangar dev`, which stops its children in order
  std::vector<char*> argv;
  for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  execv("/proc/self/exe", argv.data());
  _exit(127);
}

void StopAll(std::vector<pid_t>& pids) {
  for (auto it = pids.rbegin(); it != pids.rend(); ++it) kill(*it, SIGTERM);
  for (int i = 0; i < 100; ++i) {
    bool any = false;
    for (pid_t p : pids) any = any || (p > 0 && waitpid(p, nullptr, WNOHANG) == 0);
    if (!any) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  for (pid_t p : pids) kill(p, SIGKILL);
  for (pid_t p : pids) waitpid(p, nullptr, 0);
}

// Prints new events and tells whether every submitted job has ended.
bool Feed(httplib::Client& api, int64_t* last_event, const std::vector<uint64_t>& jobs) {
  auto r = api.Get("/v1/events?limit=200");
  if (r && r->status == 200) {
    auto events = nlohmann::json::parse(r->body, nullptr, false)["events"];
    for (auto it = events.rbegin(); it != events.rend(); ++it) {
      if ((*it)["id"].get<int64_t>() <= *last_event) continue;
      *last_event = (*it)["id"].get<int64_t>();
      std::printf("%s  %-12s %s\n", hangar::FormatUtcTimestamp((*it)["time_ms"].get<int64_t>()).substr(11, 8).c_str(),
                  (*it)["subject"].get<std::string>().c_str(), (*it)["message"].get<std::string>().c_str());
    }
    std::fflush(stdout);
  }
  bool done = !jobs.empty();
  for (uint64_t id : jobs) {
    auto j = api.Get("/v1/jobs/" + std::to_string(id));
    if (!j || j->status != 200) return false;
    std::string state = nlohmann::json::parse(j->body, nullptr, false).value("state", "");
    done = done && (state == "succeeded" || state == "failed" || state == "cancelled");
  }
  return done;
}

std::vector<uint64_t> SubmitExamples(httplib::Client& api, const std::string& dir) {
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(dir)) {
    if (e.path().extension() == ".yaml") files.push_back(e.path());
  }
  std::sort(files.begin(), files.end());
  std::vector<uint64_t> ids;
  for (const auto& f : files) {
    std::ifstream in(f);
    std::stringstream ss;
    ss << in.rdbuf();
    auto r = api.Post("/v1/jobs", ss.str(), "application/yaml");
    if (r && r->status == 201) {
      ids.push_back(nlohmann::json::parse(r->body)["id"].get<uint64_t>());
      std::printf("submitted %s as job %llu\n", f.filename().c_str(), static_cast<unsigned long long>(ids.back()));
    } else {
      std::printf("could not submit %s: %s\n", f.filename().c_str(), r ? r->body.c_str() : "no answer");
    }
  }
  return ids;
}

Status Run(const Flags& f) {
  std::error_code ec;
  fs::create_directories(f.dir + "/logs", ec);
  if (ec) return Status::Unavailable("cannot create " + f.dir + ": " + ec.message());
  std::string cluster_path = f.cluster;
  if (cluster_path.empty()) {
    cluster_path = f.dir + "/cluster.yaml";
    std::ofstream(cluster_path) << kDefaultCluster;
  }
  HANGAR_ASSIGN_OR_RETURN(auto cluster, cluster::LoadClusterFile(cluster_path));
  if (f.port < 1 || f.port > 65534) {
    return Status::InvalidArgument("--port " + std::to_string(f.port) +
                                   " is not a port the API can use: give 1-65534 (the agents take the next one)");
  }
  for (int p : {f.port, f.port + 1}) {  // refuse early and clearly when a port is taken
    if (!PortIsFree("127.0.0.1", p)) {
      return Status::Unavailable("port " + std::to_string(p) + " on 127.0.0.1 is in use; choose another with --port");
    }
  }
  const std::string api = "127.0.0.1:" + std::to_string(f.port);
  const std::string agents = "127.0.0.1:" + std::to_string(f.port + 1);
  std::vector<pid_t> pids;
  pids.push_back(Spawn({"hangar", "controller", "--cluster", cluster_path, "--api", api, "--agents", agents,
                        "--store", "sqlite://" + f.dir + "/state.db", "--heartbeat-timeout", f.heartbeat_timeout,
                        "--checkpoint-root", f.dir + "/checkpoints", "--auth", "none"},
                       f.dir + "/logs/controller.log"));
  for (const auto& n : cluster.topology->nodes()) {
    pids.push_back(Spawn({"hangar", "agent", "--controller", agents, "--node", n.name, "--cluster", cluster_path,
                          "--state-dir", f.dir + "/agents/" + n.name},
                         f.dir + "/logs/agent-" + n.name + ".log"));
  }
  signal(SIGINT, [](int) { g_stop = true; });
  signal(SIGTERM, [](int) { g_stop = true; });
  httplib::Client client("http://" + api);
  client.set_connection_timeout(1, 0);
  bool up = false;
  for (int i = 0; i < 100 && !g_stop && !up; ++i) {
    auto r = client.Get("/healthz");
    up = r && r->status == 200 && nlohmann::json::parse(r->body, nullptr, false).value("agents", 0) ==
                                      static_cast<int>(cluster.topology->nodes().size());
    if (!up) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  if (!up) {
    StopAll(pids);
    return Status::Unavailable("the local cluster did not come up within 10 s; see " + f.dir + "/logs/");
  }
  std::printf("\nHangar dev cluster '%s' is up: %zu nodes, %lld GPUs, store %s/state.db\n"
              "  API:   http://%s   (export HANGAR_URL=http://%s)\n"
              "  try:   hangar nodes | hangar submit examples/jobs/notebook.yaml | hangar jobs | hangar logs 1\n"
              "  logs:  %s/logs/      stop: Ctrl-C\n\n",
              cluster.topology->name().c_str(), cluster.topology->nodes().size(),
              static_cast<long long>(cluster.topology->total_gpus()), f.dir.c_str(), api.c_str(), api.c_str(), f.dir.c_str());
  std::vector<uint64_t> submitted;
  if (!f.submit_dir.empty()) submitted = SubmitExamples(client, f.submit_dir);
  int64_t last_event = 0;
  while (!g_stop) {
    const bool done = Feed(client, &last_event, submitted);
    if (done && f.exit_when_done) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
  }
  std::printf("\nstopping the local cluster...\n");
  StopAll(pids);
  return Status::Ok();
}

}  // namespace

void RegisterDevCommand(CLI::App& app, int* rc) {
  auto f = std::make_shared<Flags>();
  CLI::App* c = app.add_subcommand("dev", "Run a whole local cluster: a controller and agents with fake GPUs");
  c->add_option("--cluster", f->cluster, "cluster.yaml (default: 4 nodes x 8 GPUs on two leaves)");
  c->add_option("--dir", f->dir, "Where the store, logs and task files go")->capture_default_str();
  c->add_option("--port", f->port, "API port on 127.0.0.1 (agents use the next one)")->capture_default_str();
  c->add_option("--submit-examples", f->submit_dir, "Submit every .yaml job spec in this folder");
  c->add_flag("--exit-when-done", f->exit_when_done, "Stop once the submitted jobs have ended");
  c->add_option("--heartbeat-timeout", f->heartbeat_timeout, "Node lost after this silence")->capture_default_str();
  c->callback([f, rc] {
    Status s = Run(*f);
    if (!s.ok()) {
      std::fprintf(stderr, "hangar dev: %s\n", s.message().c_str());
      *rc = 2;
    }
  });
}

}  // namespace hangar::controller
