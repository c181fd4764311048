#include "ha_cluster.h"

#include <fcntl.h>
#include <httplib.h>
#include <libpq-fe.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <sstream>
#include <thread>

#include "agent/task_journal.h"
#include "common/net.h"

namespace hangar::testing {
namespace fs = std::filesystem;
namespace {

std::string Cluster(const std::vector<std::string>& nodes) {
  std::string y =
      "name: ha\nnode_defaults: {gpus: 8, gpu_model: H100-SXM-80GB, gpu_memory: 80Gi, cpu: 64, "
      "memory: 512Gi}\n"
      "fabric:\n  spines:\n    - name: spine-0\n      leaves:\n        - name: leaf-0\n          "
      "nodes:\n";
  for (const auto& n : nodes) y += "            - {name: " + n + "}\n";
  return y;
}

}  // namespace

StatusOr<std::unique_ptr<HaCluster>> HaCluster::Start(const HaOptions& o) {
  std::unique_ptr<HaCluster> c(new HaCluster());
  c->o_ = o;
  HANGAR_ASSIGN_OR_RETURN(c->pg_, controller::testing::PostgresServer::Start());
  c->url_ = c->pg_->Url();
  if (o.proxy_first) {
    c->proxy_ = std::make_unique<TcpProxy>(c->pg_->port());
    if (c->proxy_->port() == 0) return Status::Unavailable("the store proxy cannot listen");
  }
  char tmpl[] = "/tmp/hangar-ha-XXXXXX";
  if (!mkdtemp(tmpl)) return Status::Unavailable("cannot make a temp dir");
  c->dir_ = tmpl;
  chmod(c->dir_.c_str(), 0711);
  c->cluster_path_ = c->dir_ + "/cluster.yaml";
  std::ofstream(c->cluster_path_) << Cluster(o.nodes);
  if (o.before_controllers) HANGAR_RETURN_IF_ERROR(o.before_controllers(c->url_));
  for (int i = 0; i < o.controllers; ++i) {
    c->api_ports_.push_back(PickFreePort("127.0.0.1"));
    c->agent_ports_.push_back(PickFreePort("127.0.0.1"));
    c->session_ports_.push_back(PickFreePort("127.0.0.1"));
    c->pids_.push_back(0);
    c->exit_status_.push_back(-1);
  }
  // The first leads (it starts alone); the others stand by.
  HANGAR_RETURN_IF_ERROR(c->StartController(0));
  // A store filled beforehand (a benchmark's history) takes its first leader a while to restore.
  if (c->WaitLeader((o.before_controllers ? 180 : 20) * kSecond) != 0)
    return Status::Unavailable("the first controller did not lead: " + c->Describe());
  for (int i = 1; i < o.controllers; ++i) HANGAR_RETURN_IF_ERROR(c->StartController(i));
  HANGAR_RETURN_IF_ERROR(c->StartAgents());
  return c;
}

HaCluster::~HaCluster() {
  for (pid_t p : agents_) kill(p, SIGKILL);
  for (pid_t p : pids_) {
    if (p > 0) {
      kill(p, SIGCONT);
      kill(p, SIGKILL);
    }
  }
  for (pid_t p : agents_) waitpid(p, nullptr, 0);
  for (pid_t p : pids_) {
    if (p > 0) waitpid(p, nullptr, 0);
  }
  // The tasks: every record's pid that had not ended.
  std::error_code ec;
  for (const auto& n : o_.nodes) {
    for (const auto& t : agent::LatestTaskRecords(dir_ + "/agents/" + n)) {
      if (t.value("pid", 0) > 0 && !t.value("ended", false)) kill(-t.value("pid", 0), SIGKILL);
    }
  }
  if (!dir_.empty() && !std::getenv("HANGAR_KEEP_TEST_DIRS")) fs::remove_all(dir_, ec);
}

pid_t HaCluster::Spawn(const std::vector<std::string>& args, const std::string& log) {
  pid_t pid = fork();
  if (pid != 0) return pid;
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

Status HaCluster::StartController(int i) {
  if (Alive(i))
    return Status::FailedPrecondition("controller " + std::to_string(i) + " runs already");
  const std::string port_file = dir_ + "/ctl-" + std::to_string(i) + ".json";
  fs::remove(port_file);
  const std::string url =
      i == 0 && proxy_ ? "postgres://hangar@127.0.0.1:" + std::to_string(proxy_->port()) + "/hangar"
                       : url_;
  pids_[i] = Spawn({"hangar",
                    "controller",
                    "--cluster",
                    cluster_path_,
                    "--store",
                    url,
                    "--api",
                    "127.0.0.1:" + std::to_string(api_ports_[i]),
                    "--agents",
                    "127.0.0.1:" + std::to_string(agent_ports_[i]),
                    "--sessions",
                    "127.0.0.1:" + std::to_string(session_ports_[i]),
                    "--port-file",
                    port_file,
                    "--auth",
                    "none",
                    "--insecure",
                    "--name",
                    "ctl-" + std::to_string(i),
                    "--lease",
                    o_.lease,
                    "--lease-renew",
                    o_.renew,
                    "--lease-poll",
                    o_.poll,
                    "--standby-follow",
                    o_.follow,
                    "--checkpoint-root",
                    dir_ + "/checkpoints"},
                   dir_ + "/ctl-" + std::to_string(i) + ".log");
  exit_status_[i] = -1;
  // Up when it answers GET /v1/leader (a standby does; the port file waits until it leads).
  for (int t = 0; t < 400; ++t) {
    if (!Alive(i))
      return Status::Unavailable("controller " + std::to_string(i) + " exited: " + Describe());
    httplib::Client c("127.0.0.1", api_ports_[i]);
    c.set_connection_timeout(0, 200'000);
    if (auto r = c.Get("/v1/leader"); r && r->status == 200) return Status::Ok();
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return Status::Unavailable("controller " + std::to_string(i) + " did not start");
}

Status HaCluster::StartAgents() {
  std::string list;
  for (size_t i = 0; i < agent_ports_.size(); ++i)
    list += (i ? "," : "") + std::string("127.0.0.1:") + std::to_string(agent_ports_[i]);
  for (const auto& n : o_.nodes) {
    std::vector<std::string> args = {
        "hangar",      "agent",       "--controller",        list,        "--node", n, "--cluster",
        cluster_path_, "--state-dir", dir_ + "/agents/" + n, "--insecure"};
    args.insert(args.end(), o_.agent_args.begin(), o_.agent_args.end());
    agents_.push_back(Spawn(args, dir_ + "/agent-" + n + ".log"));
  }
  for (int t = 0; t < 400; ++t) {
    auto h = Get("/healthz");
    if (h.is_object() && h.value("agents", 0u) == o_.nodes.size()) return Status::Ok();
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return Status::Unavailable("the agents did not all connect to the leader: " + Describe());
}

void HaCluster::CutFirstFromStore() {
  if (proxy_) proxy_->Cut();
}

void HaCluster::Signal(int i, int sig) {
  if (Alive(i)) kill(pids_[i], sig);
}

bool HaCluster::Alive(int i) {
  if (pids_[i] <= 0) return false;
  int st = 0;
  if (waitpid(pids_[i], &st, WNOHANG) == pids_[i]) {
    exit_status_[i] = st;
    pids_[i] = 0;
    return false;
  }
  return true;
}

int HaCluster::WaitExit(int i, Duration timeout) {
  const int64_t until = MonotonicNanos() + timeout * 1'000'000;
  while (Alive(i) && MonotonicNanos() < until)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  return Alive(i) ? -1 : exit_status_[i];
}

int HaCluster::Leader() {
  for (int i = 0; i < controllers(); ++i) {
    if (!Alive(i)) continue;
    httplib::Client c("127.0.0.1", api_ports_[i]);
    c.set_connection_timeout(0, 300'000);
    c.set_read_timeout(0, 500'000);
    auto r = c.Get("/v1/leader");
    if (!r || r->status != 200) continue;
    auto j = nlohmann::json::parse(r->body, nullptr, false);
    if (j.is_object() && j.value("role", "") == "leader") return i;
  }
  return -1;
}

int HaCluster::WaitLeader(Duration timeout) {
  const int64_t until = MonotonicNanos() + timeout * 1'000'000;
  int l = Leader();
  while (l < 0 && MonotonicNanos() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    l = Leader();
  }
  return l;
}

bool HaCluster::WaitStandbysReady(Duration timeout) {
  const int64_t until = MonotonicNanos() + timeout * 1'000'000;
  while (MonotonicNanos() < until) {
    bool all = true;
    for (int i = 0; i < controllers() && all; ++i) {
      if (!Alive(i)) continue;
      httplib::Client c("127.0.0.1", api_ports_[i]);
      c.set_connection_timeout(0, 300'000);
      c.set_read_timeout(0, 500'000);
      auto r = c.Get("/v1/leader");
      auto j =
          r && r->status == 200 ? nlohmann::json::parse(r->body, nullptr, false) : nlohmann::json();
      if (!j.is_object()) {
        all = false;
      } else if (j.value("role", "") == "standby") {
        all = j.value("following", nlohmann::json::object()).value("ready", false);
      }
    }
    if (all) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return false;
}

std::string HaCluster::ApiList() const {
  std::string list;
  for (int i = 0; i < controllers(); ++i) list += (i ? "," : "") + api(i);
  return list;
}

}  // namespace hangar::testing
