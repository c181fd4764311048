// Management and data networks apart (issue 16 item 7, docs/networks.md), on network namespaces
// the test makes: a controller host and two GPU nodes, each node with a management link and two
// data links (one per rail) on bridges of their own. The controller listens on the management
// network only, refuses an agent that reaches it from another node's address, and a two-node
// torch.distributed all-reduce that Hangar launches runs over the data links its tasks are given,
// while the controller's traffic stays on the management link.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <sched.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <thread>

#include "agent/task_journal.h"
#include "local_cluster.h"

namespace hangar::testing {
namespace {

namespace fs = std::filesystem;

constexpr int kApiPort = 18080;  // namespaces of their own: nothing else listens there
constexpr int kAgentPort = 18081;

class NetworkSeparationTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(geteuid(), 0u)
        << "network namespaces need root (scripts/test.sh runs the suite as root)";
    prefix_ = "hg" + std::to_string(getpid());
    char tmpl[] = "/tmp/hangar-netsep-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    // f: the switches (a bridge per network); c: the controller's host, on the management
    // network and (to show it is not served there) rail 0 of the data network; a, b: nodes.
    const std::string script = "set -e\nP=" + prefix_ + R"(
for ns in f c a b; do
  ip netns add $P$ns
  ip -n $P$ns link set lo up
  ip netns exec $P$ns sysctl -qw net.ipv6.conf.all.disable_ipv6=1 net.ipv6.conf.default.disable_ipv6=1
done
for br in brm brd0 brd1; do ip -n ${P}f link add $br type bridge; ip -n ${P}f link set $br up; done
link() {  # host interface bridge address
  ip -n ${P}f link add $1$2 type veth peer name $2 netns $P$1
  ip -n ${P}f link set $1$2 master $3 up
  ip -n $P$1 addr add $4 dev $2
  ip -n $P$1 link set $2 up
}
link c mgmt brm 10.77.0.1/24
link c data0 brd0 10.78.0.1/24
link a mgmt brm 10.77.0.11/24
link a data0 brd0 10.78.0.11/24
link a data1 brd1 10.79.0.11/24
link b mgmt brm 10.77.0.12/24
link b data0 brd0 10.78.0.12/24
link b data1 brd1 10.79.0.12/24
)";
    made_namespaces_ = true;
    ASSERT_EQ(
        std::system(("bash -c '" + Quoted(script) + "' >" + dir_ + "/netns.log 2>&1").c_str()), 0)
        << ReadFile(dir_ + "/netns.log");
    cluster_ = dir_ + "/cluster.yaml";
    std::ofstream(cluster_) << R"(name: netsep
networks: {management: 10.77.0.0/24}
node_defaults:
  gpus: 2
  gpu_model: H100-SXM-80GB
  gpu_memory: 80Gi
  cpu: 8
  memory: 32Gi
  data_interfaces: [{netdev: data0, hca: mlx5_0}, {netdev: data1, hca: mlx5_1}]
nodes:
  - {name: "node-[1-2]", management_address: "10.77.0.[11-12]", data_address: "10.78.0.[11-12]"}
)";
  }

  void TearDown() override {
    for (pid_t p : pids_) kill(p, SIGTERM);
    for (pid_t p : pids_) waitpid(p, nullptr, 0);
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(dir_ + "/agents", ec)) {
      for (const auto& t : agent::LatestTaskRecords(e.path().string())) {
        if (t.value("pid", 0) > 0 && !t.value("ended", false)) kill(-t.value("pid", 0), SIGKILL);
      }
    }
    if (made_namespaces_) {
      std::system(
          ("for ns in f c a b; do ip netns del " + prefix_ + "$ns 2>/dev/null; done").c_str());
    }
    if (!std::getenv("HANGAR_KEEP_TEST_DIRS")) fs::remove_all(dir_, ec);
  }

  static std::string Quoted(const std::string& s) {  // for inside '...'
    std::string out;
    for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
    return out;
  }
  std::string Ns(const std::string& host) const { return prefix_ + host; }

  // Runs `hangar args...` in the host's namespace, its output to `log`.
  pid_t Spawn(const std::string& host, const std::vector<std::string>& args,
              const std::string& log) {
    const pid_t pid = SpawnHangar(args, log, Ns(host));
    pids_.push_back(pid);
    return pid;
  }

  std::vector<std::string> ControllerArgs(const std::string& agents) const {
    return {"hangar",
            "controller",
            "--cluster",
            cluster_,
            "--store",
            "sqlite://" + dir_ + "/state.db",
            "--auth",
            "none",
            "--insecure",
            "--api",
            "10.77.0.1:" + std::to_string(kApiPort),
            "--agents",
            agents,
            "--checkpoint-root",
            dir_ + "/checkpoints"};
  }
  pid_t StartAgent(const std::string& host, const std::string& node, const std::string& state) {
    return Spawn(host,
                 {"hangar", "agent", "--controller", "10.77.0.1:" + std::to_string(kAgentPort),
                  "--node", node, "--cluster", cluster_, "--state-dir", dir_ + "/agents/" + state,
                  "--insecure", "--stop-tasks-on-exit"},
                 dir_ + "/agent-" + state + ".log");
  }

  // An HTTP call to the controller, made from a thread in the controller host's namespace.
  std::pair<int, std::string> Http(const std::string& method, const std::string& path,
                                   const std::string& body = "") {
    std::pair<int, std::string> out{0, ""};
    std::thread t([&] {
      int nsfd = open(("/run/netns/" + Ns("c")).c_str(), O_RDONLY | O_CLOEXEC);
      if (nsfd < 0 || setns(nsfd, CLONE_NEWNET) != 0) return;
      close(nsfd);
      httplib::Client c("10.77.0.1", kApiPort);
      c.set_connection_timeout(2, 0);
      c.set_read_timeout(10, 0);
      auto r = method == "POST" ? c.Post(path, body, "application/yaml") : c.Get(path);
      if (r) out = {r->status, r->body};
    });
    t.join();
    return out;
  }

  // Bytes through an interface of a host (both directions), from the kernel's counters.
  int64_t Bytes(const std::string& host, const std::string& dev, const char* dir = nullptr) {
    const std::string out = dir_ + "/link.json";
    if (std::system(("ip -n " + Ns(host) + " -j -s link show dev " + dev + " >" + out).c_str()) !=
        0)
      return -1;
    auto j = nlohmann::json::parse(ReadFile(out), nullptr, false);
    if (!j.is_array() || j.empty()) return -1;
    const auto& s = j[0]["stats64"];
    if (dir) return s[dir]["bytes"].get<int64_t>();
    return s["rx"]["bytes"].get<int64_t>() + s["tx"]["bytes"].get<int64_t>();
  }

  std::string prefix_, dir_, cluster_;
  bool made_namespaces_ = false;
  std::vector<pid_t> pids_;
};

TEST_F(NetworkSeparationTest, ControlTrafficOnTheManagementLinkAndCollectivesOnTheDataLinks) {
  // A controller asked to listen on every interface would serve the data network too: refused.
  {
    const std::string log = dir_ + "/wildcard.log";
    pid_t p = Spawn("c", ControllerArgs("0.0.0.0:" + std::to_string(kAgentPort)), log);
    int status = 0;
    waitpid(p, &status, 0);
    pids_.pop_back();
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) != 0);
    EXPECT_TRUE(Contains(
        ReadFile(log),
        "--agents 0.0.0.0 listens on every interface, the data network's too; give --agents "
        "an address of this host in networks.management 10.77.0.0/24 (cluster.yaml), or a "
        "loopback one (docs/networks.md)"))
        << ReadFile(log);
  }
  Spawn("c", ControllerArgs("10.77.0.1:" + std::to_string(kAgentPort)), dir_ + "/controller.log");
  ASSERT_TRUE(
      LocalCluster::WaitFor([&] { return Http("GET", "/healthz").first == 200; }, 20 * kSecond))
      << ReadFile(dir_ + "/controller.log");
  // What the controller host listens on: the management address only (the API, the agents' port
  // and the interactive sessions' port, which is on the API's host).
  ASSERT_EQ(
      std::system(("ip netns exec " + Ns("c") + " ss -Hltn >" + dir_ + "/listen.txt").c_str()), 0);
  const auto listening = Lines(ReadFile(dir_ + "/listen.txt"));
  EXPECT_EQ(listening.size(), 3u) << ReadFile(dir_ + "/listen.txt");
  for (const auto& l : listening) EXPECT_TRUE(Contains(l, " 10.77.0.1:")) << l;

  StartAgent("a", "node-1", "node-1");
  StartAgent("b", "node-2", "node-2");
  // node-2's host trying to speak for node-1: its connection comes from 10.77.0.12.
  StartAgent("b", "node-1", "impostor");
  auto ready = [&] {
    auto j = nlohmann::json::parse(Http("GET", "/v1/nodes").second, nullptr, false);
    int n = 0;
    if (j.is_object() && j["nodes"].is_array()) {
      for (const auto& x : j["nodes"]) n += x.value("state", "") == "ready";
    }
    return n == 2;
  };
  ASSERT_TRUE(LocalCluster::WaitFor(ready, 30 * kSecond)) << Http("GET", "/v1/nodes").second;
  const std::string refusal =
      "node node-1's agent connected from 10.77.0.12, but cluster.yaml gives its management "
      "address "
      "as 10.77.0.11: agents talk to the controller over the management network only";
  EXPECT_TRUE(LocalCluster::WaitFor(
      [&] { return Contains(ReadFile(dir_ + "/agent-impostor.log"), refusal); }, 20 * kSecond))
      << ReadFile(dir_ + "/agent-impostor.log");
  EXPECT_TRUE(Contains(Http("GET", "/metrics").second,
                       "hangar_agent_messages_refused_total{reason=\"wrong_network\"}"));

  // A two-node all-reduce of 4M floats (16 MB) over gloo, with the environment Hangar gives.
  const std::string out = dir_ + "/out";
  fs::create_directories(out);
  const int64_t mgmt_before = Bytes("a", "mgmt"),
                data_before = Bytes("a", "data0") + Bytes("a", "data1");
  const std::string script = std::string(HANGAR_SOURCE_DIR) + "/tests/integration/allreduce.py";
  auto [status, body] = Http("POST", "/v1/jobs",
                             "name: netsep\ntasks:\n  - replicas: 2\n    gpus: 2\n    command: "
                             "[/bin/sh, -c, \"env | grep -E "
                             "'^(NCCL_|GLOO_|MASTER_ADDR)' | sort > " +
                                 out + "/env.$HANGAR_TASK_INDEX; exec /usr/bin/python3 " + script +
                                 " " + out + " 4000000\"]\n");
  ASSERT_EQ(status, 201) << body;
  const uint64_t id = nlohmann::json::parse(body).value("id", uint64_t{0});
  nlohmann::json job;
  ASSERT_TRUE(LocalCluster::WaitFor(
      [&] {
        job = nlohmann::json::parse(Http("GET", "/v1/jobs/" + std::to_string(id)).second, nullptr,
                                    false);
        const std::string state = job.is_object() ? job.value("state", "") : "";
        return state == "succeeded" || state == "failed";
      },
      120 * kSecond))
      << job.dump(2);
  ASSERT_EQ(job.value("state", ""), "succeeded")
      << job.dump(2)
      << Http("GET", "/v1/jobs/" + std::to_string(id) + "/logs?task=0&stream=stderr").second;
  EXPECT_EQ(ReadFile(out + "/allreduce.0"), "3 3\n");
  EXPECT_EQ(ReadFile(out + "/allreduce.1"), "3 3\n");
  const std::string master =
      job["task_list"][0].value("node", "") == "node-1" ? "10.78.0.11" : "10.78.0.12";
  for (const char* rank : {"0", "1"}) {
    EXPECT_EQ(ReadFile(out + "/env." + rank),
              "GLOO_SOCKET_IFNAME=data0,data1\nMASTER_ADDR=" + master +
                  "\nNCCL_IB_HCA==mlx5_0,mlx5_1\nNCCL_SOCKET_IFNAME==data0,data1\n");
  }
  const int64_t mgmt = Bytes("a", "mgmt") - mgmt_before,
                data = Bytes("a", "data0") + Bytes("a", "data1") - data_before;
  std::printf("node-1 during the job: %lld bytes on its management link, %lld on its data links\n",
              static_cast<long long>(mgmt), static_cast<long long>(data));
  EXPECT_GE(data, 16'000'000) << "the all-reduce's 16 MB each way";
  EXPECT_LT(mgmt, 1'000'000) << "the controller's traffic (launch, reports, heartbeats) is small";
  // The controller's host sent nothing on the data network, and got no connection there.
  EXPECT_EQ(Bytes("c", "data0", "tx"), 0);
}

}  // namespace
}  // namespace hangar::testing
