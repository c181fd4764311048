#include "local_cluster.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <sched.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "agent/task_journal.h"
#include "loopback_registry.h"

namespace hangar::testing {

namespace fs = std::filesystem;

LocalCluster::LocalCluster(const std::string& cluster_yaml, std::vector<std::string> extra)
    : controller_args_(std::move(extra)) {
  char tmpl[] = "/tmp/hangar-it-XXXXXX";
  dir_ = mkdtemp(tmpl);
  // Tasks may run as other users (issue 16): they must reach their folders under the agents'
  // state directories in here, as they would under /var/lib/hangar.
  chmod(dir_.c_str(), 0711);
  cluster_path_ = dir_ + "/cluster.yaml";
  std::ofstream(cluster_path_) << cluster_yaml;
}

LocalCluster::~LocalCluster() {
  for (auto& [node, pid] : agents_) {
    if (pid > 0) kill(pid, SIGKILL);
  }
  if (controller_ > 0) kill(controller_, SIGKILL);
  for (auto& [node, pid] : agents_) {
    if (pid > 0) waitpid(pid, nullptr, 0);
  }
  if (controller_ > 0) waitpid(controller_, nullptr, 0);
  KillTasks();
  RemoveContainersUnder(dir_ + "/agents");  // a container outlives its podman process
  UnmountPins(dir_ + "/agents");
  std::error_code ec;
  if (::testing::Test::HasFailure()) {
    std::printf("cluster directory (set HANGAR_KEEP_TEST_DIRS=1 to keep it): %s\n", dir_.c_str());
  }
  if (!std::getenv("HANGAR_KEEP_TEST_DIRS")) fs::remove_all(dir_, ec);
}

// A killed agent leaves its container tasks' pinned mount sources mounted
// (agent/container/mount_source.h): they are detached before the folder is removed, so that the
// removal never reaches through one into what it mounts.
void LocalCluster::UnmountPins(const std::string& agents_dir) {
  // And whatever else is mounted under the agents' folders (podman's own bind mount of its
  // overlay store, left by a podman the test killed), deepest first.
  std::vector<std::string> under;
  std::ifstream info("/proc/self/mountinfo");
  for (std::string line; std::getline(info, line);) {
    std::istringstream fields(line);
    std::string id, parent, dev, root, point;
    fields >> id >> parent >> dev >> root >> point;
    if (point.rfind(agents_dir + "/", 0) == 0) under.push_back(point);
  }
  std::sort(under.rbegin(), under.rend());
  for (const auto& point : under) umount2(point.c_str(), MNT_DETACH);
  std::error_code ec;
  for (const auto& agent : fs::directory_iterator(agents_dir, ec)) {
    std::error_code inner;
    for (const auto& task : fs::directory_iterator(agent.path() / "mounts", inner)) {
      std::error_code pins;
      for (const auto& pin : fs::directory_iterator(task.path(), pins))
        umount2(pin.path().c_str(), MNT_DETACH);
    }
  }
}

// Every task any agent started, by the pid in its record: tests must leave nothing running.
void LocalCluster::KillTasks() {
  std::error_code ec;
  if (!fs::exists(dir_ + "/agents", ec)) return;
  for (const auto& e : fs::directory_iterator(dir_ + "/agents", ec)) {
    for (const auto& t : agent::LatestTaskRecords(e.path().string())) {
      const int pid = t.value("pid", 0);
      if (pid > 0 && !t.value("ended", false)) kill(-pid, SIGKILL);
    }
    // MPS control daemons (issue 22): a killed agent leaves them to its tasks.
    for (const auto& d : fs::directory_iterator(e.path() / "mps", ec)) {
      std::ifstream pid_file(d.path() / "pipe" / "nvidia-cuda-mps-control.pid");
      int pid = 0;
      if (pid_file >> pid && pid > 1) kill(pid, SIGKILL);
    }
  }
}

pid_t LocalCluster::Spawn(const std::vector<std::string>& args, const std::string& log) {
  return SpawnHangar(args, log);
}

pid_t SpawnHangar(const std::vector<std::string>& args, const std::string& log,
                  const std::string& netns) {
  pid_t pid = fork();
  if (pid != 0) return pid;
  if (!netns.empty()) {
    int nsfd = open(("/run/netns/" + netns).c_str(), O_RDONLY | O_CLOEXEC);
    if (nsfd < 0 || setns(nsfd, CLONE_NEWNET) != 0) _exit(126);
    close(nsfd);
  }
  int fd = open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
  if (fd >= 0) {
    dup2(fd, 1);
    dup2(fd, 2);
  }
  std::vector<char*> argv;
  for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  execv(HANGAR_BINARY, argv.data());
  _exit(127);
}

void LocalCluster::StartController() {
  const std::string port_file = dir_ + "/ports.json";
  fs::remove(port_file);
  std::vector<std::string> args = {"hangar",
                                   "controller",
                                   "--cluster",
                                   cluster_path_,
                                   "--api",
                                   "127.0.0.1:" + std::to_string(api_port_),
                                   "--agents",
                                   "127.0.0.1:" + std::to_string(agent_port_),
                                   "--port-file",
                                   port_file,
                                   "--checkpoint-root",
                                   dir_ + "/checkpoints"};
  args.insert(args.end(), controller_args_.begin(), controller_args_.end());
  // A SQLite store in the folder unless the test names one (a PostgreSQL URL).
  if (std::find(args.begin(), args.end(), "--store") == args.end()) {
    args.insert(args.end(), {"--store", "sqlite://" + dir_ + "/state.db"});
  }
  // An open API unless the test asks for tokens (the RBAC tests do).
  if (std::find(args.begin(), args.end(), "--auth") == args.end()) {
    args.push_back("--auth");
    args.push_back("none");
  }
  // Plaintext on loopback unless the test sets up TLS (tls_test does).
  if (std::find(args.begin(), args.end(), "--tls-dir") == args.end()) args.push_back("--insecure");
  controller_ = Spawn(args, dir_ + "/controller.log");
  ASSERT_TRUE(WaitFor([&] { return fs::exists(port_file); }, 10 * kSecond))
      << "the controller did not start; see " << dir_ << "/controller.log";
  std::ifstream in(port_file);
  auto j = nlohmann::json::parse(in);
  api_port_ = j["api"];
  agent_port_ = j["agents"];
}

void LocalCluster::KillController(int sig) {
  kill(controller_, sig);
  waitpid(controller_, nullptr, 0);
  controller_ = 0;
}

void LocalCluster::StartAgent(const std::string& node, std::vector<std::string> extra) {
  std::vector<std::string> args = {"hangar",       "agent",
                                   "--controller", "127.0.0.1:" + std::to_string(agent_port_),
                                   "--node",       node,
                                   "--cluster",    cluster_path_,
                                   "--state-dir",  dir_ + "/agents/" + node};
  args.insert(args.end(), extra.begin(), extra.end());
  if (std::find(args.begin(), args.end(), "--tls-dir") == args.end() &&
      std::find(args.begin(), args.end(), "--tls-ca") == args.end()) {
    args.push_back("--insecure");
  }
  agents_[node] = Spawn(args, dir_ + "/agent-" + node + ".log");
}

void LocalCluster::StartAllAgents(const std::vector<std::string>& nodes) {
  for (const auto& n : nodes) StartAgent(n);
}

void LocalCluster::KillAgent(const std::string& node, int sig) {
  pid_t pid = agents_[node];
  kill(pid, sig);
  waitpid(pid, nullptr, 0);
  agents_[node] = 0;
}

void LocalCluster::SignalAgent(const std::string& node, int sig) { kill(agents_[node], sig); }

nlohmann::json LocalCluster::Get(const std::string& path, int* status) {
  httplib::Client c("127.0.0.1", api_port_);
  c.set_read_timeout(10, 0);
  auto r = c.Get(path);
  if (status) *status = r ? r->status : 0;
  if (!r) return nullptr;
  return nlohmann::json::parse(r->body, nullptr, false);
}

std::string LocalCluster::GetText(const std::string& path) {
  httplib::Client c("127.0.0.1", api_port_);
  c.set_read_timeout(30, 0);
  auto r = c.Get(path);
  return r ? r->body : "";
}

std::string FourNodeTwoLeafCluster(const std::string& name) {
  return "name: " + name + R"(
node_defaults: {gpus: 8, gpu_model: H100-SXM-80GB, gpu_memory: 80Gi, cpu: 64, memory: 512Gi}
fabric:
  spines:
    - name: spine-0
      leaves:
        - {name: leaf-0, nodes: [{name: "node-[1-2]"}]}
        - {name: leaf-1, nodes: [{name: "node-[3-4]"}]}
)";
}

std::string TaskAccountFields() {
  const uid_t uid = geteuid() == 0 ? 61001 : geteuid();
  const gid_t gid = geteuid() == 0 ? 61001 : getegid();
  return "\"uid\": " + std::to_string(uid) + ", \"gid\": " + std::to_string(gid);
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (!line.empty()) out.push_back(line);
  }
  return out;
}

nlohmann::json LocalCluster::Post(const std::string& path, const std::string& body, int* status) {
  httplib::Client c("127.0.0.1", api_port_);
  c.set_read_timeout(10, 0);
  auto r = c.Post(path, body, "application/yaml");
  if (status) *status = r ? r->status : 0;
  if (!r) return nullptr;
  return nlohmann::json::parse(r->body, nullptr, false);
}

bool LocalCluster::WaitFor(const std::function<bool()>& pred, Duration timeout) {
  const Time until = SystemClock::Default()->Now() + timeout;
  while (SystemClock::Default()->Now() < until) {
    if (pred()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return pred();
}

bool LocalCluster::WaitForAgents(size_t n, Duration timeout) {
  return WaitFor(
      [&] {
        auto h = Get("/healthz");
        return h.is_object() && h.value("agents", 0u) == n;
      },
      timeout);
}

bool LocalCluster::WaitForNodesReady(const std::vector<std::string>& nodes, Duration timeout) {
  return WaitFor(
      [&] {
        for (const auto& n : nodes) {
          if (Get("/v1/nodes/" + n).value("state", "") != "ready") return false;
        }
        return true;
      },
      timeout);
}

std::string LocalCluster::FirstTaskNode(uint64_t id) {
  auto j = Job(id);
  if (!j.is_object() || !j.contains("task_list") || j["task_list"].empty()) return "";
  return j["task_list"][0].value("node", "");
}

std::string LocalCluster::JobEvents(uint64_t id) {
  std::string out;
  auto e = Get("/v1/events?subject=job/" + std::to_string(id) + "&limit=1000");
  if (!e.is_object()) return out;
  for (const auto& ev : e["events"]) out += ev.value("message", "") + "\n";
  return out;
}

bool LocalCluster::WaitForJobState(uint64_t id, const std::string& state, Duration timeout) {
  return WaitFor(
      [&] {
        auto j = Job(id);
        return j.is_object() && j.value("state", "") == state;
      },
      timeout);
}

}  // namespace hangar::testing
