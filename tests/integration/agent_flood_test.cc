// The agent port under an unauthenticated connection flood. gRPC 1.51's own acceptor stopped for
// good after one accept4 failed for want of a descriptor: agents could not register until the
// controller was restarted. The controller now accepts the port itself
// (controller/agent_listener.h): past its descriptors it drops new connections and keeps accepting,
// so once the flood ends an agent registers again; and a cap plus a handshake timeout keep idle
// sockets from filling it.
#include <arpa/inet.h>
#include <fcntl.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <thread>

#include "ha_cluster.h"
#include "local_cluster.h"
#include "proto/agent.grpc.pb.h"

namespace hangar::testing {
namespace {

namespace fs = std::filesystem;

constexpr const char* kCluster =
    "node_defaults: {gpus: 1, gpu_model: H100-SXM-80GB, gpu_memory: 80Gi, cpu: 16, memory: 64Gi}\n"
    "nodes: [{name: node-1}]\n";

// The controller of the cluster in `dir` (its command line names the cluster file there).
pid_t ControllerPid(const std::string& dir) {
  std::error_code ec;
  for (const auto& e : fs::directory_iterator("/proc", ec)) {
    const std::string name = e.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream in(e.path() / "cmdline");
    std::string cmdline((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (Contains(cmdline, std::string("controller") + '\0') &&
        Contains(cmdline, dir + "/cluster.yaml")) {
      return static_cast<pid_t>(std::stol(name));
    }
  }
  return 0;
}

// `n` TCP connections to 127.0.0.1:port that never send a byte (connects not waited for).
std::vector<int> Flood(int port, int n) {
  std::vector<int> fds;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  for (int i = 0; i < n; ++i) {
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) break;
    connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
    fds.push_back(fd);
  }
  return fds;
}

void CloseAll(std::vector<int>* fds) {
  for (int fd : *fds) close(fd);
  fds->clear();
}

TEST(AgentFloodTest, AgentsRegisterAgainOnceAFloodThatExhaustedDescriptorsEnds) {
  LocalCluster cluster(kCluster);
  cluster.StartController();
  const pid_t controller = ControllerPid(cluster.dir());
  ASSERT_GT(controller, 0);
  // A few hundred sockets then suffice to use up its descriptors.
  const rlimit few{200, 200};
  ASSERT_EQ(prlimit(controller, RLIMIT_NOFILE, &few, nullptr), 0) << std::strerror(errno);
  std::vector<int> flood = Flood(cluster.agent_port(), 400);
  const std::string log = cluster.dir() + "/controller.log";
  ASSERT_TRUE(LocalCluster::WaitFor(
      [&] {
        const std::string text = ReadFile(log);
        return Contains(text, "out of file descriptors") || Contains(text, "Too many open files");
      },
      15 * kSecond))
      << "the flood did not exhaust the controller's descriptors";
  CloseAll(&flood);
  cluster.StartAgent("node-1");
  EXPECT_TRUE(cluster.WaitForAgents(1, 20 * kSecond)) << ReadFile(log);
}

// A standby accepts its agent port as the leader does: agents that reach it (an agent tries every
// controller of its list) are told where the leader is, during and after a flood that used up its
// descriptors. With gRPC's own acceptor it stayed deaf until restarted.
TEST(AgentFloodTest, AStandbyAnswersAgentsAgainOnceAFloodThatExhaustedDescriptorsEnds) {
  HaOptions options;
  options.controllers = 2;
  auto started = HaCluster::Start(options);
  ASSERT_TRUE(started.ok()) << started.status().ToString();
  HaCluster& ha = **started;
  const int leader = ha.WaitLeader(20 * kSecond);
  ASSERT_GE(leader, 0) << ha.Describe();
  const int standby = 1 - leader;
  const rlimit few{200, 200};
  ASSERT_EQ(prlimit(ha.pid(standby), RLIMIT_NOFILE, &few, nullptr), 0) << std::strerror(errno);
  std::vector<int> flood = Flood(ha.agent_port(standby), 400);
  const std::string log = ha.dir() + "/ctl-" + std::to_string(standby) + ".log";
  ASSERT_TRUE(LocalCluster::WaitFor(
      [&] {
        const std::string text = ReadFile(log);
        return Contains(text, "out of file descriptors") || Contains(text, "Too many open files");
      },
      15 * kSecond))
      << "the flood did not exhaust the standby's descriptors";
  CloseAll(&flood);
  auto stub = agent::v1::AgentChannel::NewStub(grpc::CreateChannel(
      "127.0.0.1:" + std::to_string(ha.agent_port(standby)), grpc::InsecureChannelCredentials()));
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(15));
  auto stream = stub->Connect(&ctx);
  agent::v1::ControllerMessage m;
  EXPECT_FALSE(stream->Read(&m));
  const grpc::Status s = stream->Finish();
  EXPECT_TRUE(Contains(s.error_message(), "is a standby; the leader is"))
      << s.error_code() << ": " << s.error_message() << "\n"
      << ReadFile(log);
}

TEST(AgentFloodTest, IdleSocketsBeyondTheCapAreClosedAndKeepNoAgentOut) {
  LocalCluster cluster(kCluster,
                       {"--agent-max-connections", "50", "--agent-handshake-timeout", "1s"});
  cluster.StartController();
  std::vector<int> flood = Flood(cluster.agent_port(), 300);  // held for the whole test
  const std::string log = cluster.dir() + "/controller.log";
  EXPECT_TRUE(LocalCluster::WaitFor(
      [&] { return Contains(ReadFile(log), "its cap (--agent-max-connections)"); }, 15 * kSecond));
  cluster.StartAgent("node-1");
  EXPECT_TRUE(cluster.WaitForAgents(1, 20 * kSecond)) << ReadFile(log);
  // The sockets the cap refused, and those that said nothing for a handshake timeout, were closed
  // by the controller: every one reads end-of-file (after the server's HTTP/2 hello, for those
  // gRPC took).
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  int closed = 0;
  for (int fd : flood) {
    char buf[4096];
    ssize_t n;
    while ((n = recv(fd, buf, sizeof buf, MSG_DONTWAIT)) > 0) {
    }
    closed += n == 0 || (n < 0 && errno == ECONNRESET);
  }
  EXPECT_EQ(closed, static_cast<int>(flood.size()));
  CloseAll(&flood);
}

// A stream opened and never used (past the handshake, with HTTP/2 done) is closed too, with a
// sentence: it would hold a connection for as long as its client liked.
TEST(AgentFloodTest, AStreamThatNeverRegistersIsClosed) {
  LocalCluster cluster(kCluster, {"--agent-handshake-timeout", "1s"});
  cluster.StartController();
  auto stub = agent::v1::AgentChannel::NewStub(grpc::CreateChannel(
      "127.0.0.1:" + std::to_string(cluster.agent_port()), grpc::InsecureChannelCredentials()));
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(20));
  auto stream = stub->Connect(&ctx);
  agent::v1::ControllerMessage m;
  EXPECT_FALSE(stream->Read(&m));
  const grpc::Status st = stream->Finish();
  EXPECT_NE(st.error_message().find("no Register within 1000 ms"), std::string::npos)
      << st.error_message();
}

}  // namespace
}  // namespace hangar::testing
