// Issue 16: TLS everywhere outside loopback dev. `hangar certs` makes a cluster CA and the
// certificates; the controller serves HTTPS and mutual TLS to agents; plaintext clients, clients
// of another CA and an agent with another node's certificate are refused; the CLI follows the
// scheme of its URL.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <thread>

#include "local_cluster.h"
#include "proto/agent.grpc.pb.h"

namespace hangar::testing {
namespace {

namespace pb = ::hangar::agent::v1;

constexpr const char* kCluster =
    "node_defaults: {gpus: 2, gpu_model: H100-SXM-80GB, gpu_memory: 80Gi, cpu: 16, memory: 128Gi}\n"
    "nodes: [{name: node-1}, {name: node-2}]\n";

// Runs the hangar binary with `args`; its exit code, and its output in *out.
int Hangar(const std::string& args, std::string* out = nullptr) {
  const std::string cmd = std::string(HANGAR_BINARY) + " " + args + " 2>&1";
  FILE* p = ::popen(cmd.c_str(), "r");
  std::string text;
  char buf[4096];
  for (size_t n; (n = std::fread(buf, 1, sizeof buf, p)) > 0;) text.append(buf, n);
  const int status = ::pclose(p);
  if (out) *out = text;
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

class TlsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = ::testing::TempDir() + "/tls-" + std::to_string(::getpid()) + "-" +
           ::testing::UnitTest::GetInstance()->current_test_info()->name();
    std::filesystem::remove_all(dir_);
    certs_ = dir_ + "/certs";
    ASSERT_EQ(Hangar("certs init --dir " + certs_), 0);
    ASSERT_EQ(Hangar("certs issue --controller --dir " + certs_), 0);
    for (const char* n : {"node-1", "node-2"})
      ASSERT_EQ(Hangar(std::string("certs issue --node ") + n + " --dir " + certs_), 0);
    cluster_ =
        std::make_unique<LocalCluster>(kCluster, std::vector<std::string>{"--tls-dir", certs_});
    cluster_->StartController();
  }
  void TearDown() override {
    cluster_.reset();
    std::filesystem::remove_all(dir_);
  }
  std::string Https() const { return "https://127.0.0.1:" + std::to_string(cluster_->api_port()); }
  std::string NodeState(const std::string& node) {
    std::string out;
    Hangar("node " + node + " -o json --server " + Https() + " --ca " + certs_ + "/ca.crt", &out);
    auto j = nlohmann::json::parse(out, nullptr, false);
    return j.is_object() ? j.value("state", "") : "";
  }
  std::string dir_, certs_;
  std::unique_ptr<LocalCluster> cluster_;
};

TEST_F(TlsTest, CertsAreMadeWithPrivateKeys) {
  for (const char* f : {"ca.key", "controller.key", "node-node-1.key"}) {
    struct stat st {};
    ASSERT_EQ(::stat((certs_ + "/" + f).c_str(), &st), 0) << f;
    EXPECT_EQ(st.st_mode & 0777, 0600u) << f;
  }
  std::string out;
  EXPECT_NE(Hangar("certs init --dir " + certs_, &out), 0);
  EXPECT_TRUE(Contains(out, "this directory has a CA already")) << out;
  EXPECT_NE(Hangar("certs issue --dir " + certs_, &out), 0);
  EXPECT_TRUE(Contains(out, "say whose certificate")) << out;
}

// `certs issue --nodes-of cluster.yaml`: every node's certificate at once, each good for its node.
TEST_F(TlsTest, EveryNodeOfAClusterFileGetsItsCertificate) {
  std::ofstream(dir_ + "/three.yaml") << "node_defaults: {gpus: 2, gpu_model: H100-SXM-80GB, "
                                         "gpu_memory: 80Gi, cpu: 16, memory: 128Gi}\n"
                                         "nodes: [{name: \"node-[1-3]\"}]\n";
  std::string out;
  ASSERT_EQ(Hangar("certs issue --nodes-of " + dir_ + "/three.yaml --dir " + certs_, &out), 0)
      << out;
  EXPECT_TRUE(Contains(out, "issued 3 node certificates in " + certs_)) << out;
  for (const char* n : {"node-1", "node-2", "node-3"}) {
    struct stat st {};
    ASSERT_EQ(::stat((certs_ + "/node-" + n + ".key").c_str(), &st), 0) << n;
    EXPECT_EQ(st.st_mode & 0777, 0600u) << n;
  }
  cluster_->StartAgent("node-2", {"--tls-dir", certs_});
  EXPECT_TRUE(LocalCluster::WaitFor([&] { return NodeState("node-2") == "ready"; }, 20 * kSecond));
  EXPECT_NE(Hangar("certs issue --nodes-of " + dir_ + "/missing.yaml --dir " + certs_, &out), 0);
  EXPECT_NE(
      Hangar("certs issue --node node-1 --nodes-of " + dir_ + "/three.yaml --dir " + certs_, &out),
      0);
  EXPECT_TRUE(Contains(out, "excludes")) << out;
}

TEST_F(TlsTest, AControllerWithoutTlsOrInsecureRefusesToStart) {
  std::string out;
  EXPECT_NE(
      Hangar("controller --cluster " + dir_ +
                 "/c.yaml --store memory:// --auth none --api 127.0.0.1:0 --agents 127.0.0.1:0",
             &out),
      0);
  EXPECT_TRUE(Contains(out, "the controller serves TLS: give it --tls-dir DIR")) << out;
  EXPECT_NE(Hangar("agent --node node-1 --controller 127.0.0.1:1", &out), 0);
  EXPECT_TRUE(Contains(out, "the agent talks to the controller over mutual TLS")) << out;
}

TEST_F(TlsTest, AgentsWithTheirOwnCertificateJoinAndUsersSpeakHttps) {
  cluster_->StartAgent("node-1", {"--tls-dir", certs_});
  EXPECT_TRUE(LocalCluster::WaitFor([&] { return NodeState("node-1") == "ready"; }, 20 * kSecond));
  std::string out;
  // The CLI with the CA; without it (not a CA it trusts); and http:// to a TLS server.
  EXPECT_EQ(Hangar("nodes --server " + Https() + " --ca " + certs_ + "/ca.crt", &out), 0) << out;
  EXPECT_TRUE(Contains(out, "node-1")) << out;
  EXPECT_NE(Hangar("nodes --server " + Https(), &out), 0);
  EXPECT_TRUE(
      Contains(out, "has a certificate no CA you trust signed; pass the cluster CA with --ca"))
      << out;
  EXPECT_NE(Hangar("nodes --server http://127.0.0.1:" + std::to_string(cluster_->api_port()), &out),
            0);
  EXPECT_TRUE(Contains(out, "a controller with TLS wants https://")) << out;
  // A job runs on it.
  setenv("HANGAR_CA", (certs_ + "/ca.crt").c_str(), 1);
  std::ofstream(dir_ + "/job.yaml") << "name: t\ntasks: [{gpus: 1, command: ['true']}]\n";
  EXPECT_EQ(Hangar("submit " + dir_ + "/job.yaml --server " + Https(), &out), 0) << out;
  unsetenv("HANGAR_CA");
}

TEST_F(TlsTest, ForeignAndPlaintextClientsAreRefusedOnBothPorts) {
  // An agent with node-1's certificate claiming node-2.
  cluster_->StartAgent("node-2",
                       {"--tls-ca", certs_ + "/ca.crt", "--tls-cert", certs_ + "/node-node-1.crt",
                        "--tls-key", certs_ + "/node-node-1.key"});
  std::string log;
  EXPECT_TRUE(LocalCluster::WaitFor(
      [&] {
        log = ReadFile(cluster_->dir() + "/agent-node-2.log");
        return Contains(
            log, "this agent's certificate is node node-1's; it cannot register as node node-2");
      },
      10 * kSecond))
      << log;
  // Another CA's node certificate: no TLS session at all.
  const std::string other = dir_ + "/other";
  ASSERT_EQ(Hangar("certs init --dir " + other), 0);
  ASSERT_EQ(Hangar("certs issue --node node-1 --dir " + other), 0);
  cluster_->StartAgent("node-1", {"--tls-dir", other});
  std::this_thread::sleep_for(std::chrono::seconds(2));
  EXPECT_NE(NodeState("node-1"), "ready");
  EXPECT_NE(NodeState("node-2"), "ready");
  // A plaintext gRPC client on the agent port.
  auto plain = pb::AgentChannel::NewStub(grpc::CreateChannel(
      "127.0.0.1:" + std::to_string(cluster_->agent_port()), grpc::InsecureChannelCredentials()));
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(3));
  auto stream = plain->Connect(&ctx);
  pb::AgentMessage reg;
  reg.mutable_register_()->mutable_inventory()->set_node("node-1");
  stream->Write(reg);
  pb::ControllerMessage in;
  EXPECT_FALSE(stream->Read(&in));
  EXPECT_FALSE(stream->Finish().ok());
  // A client of another CA on the API.
  std::string out;
  EXPECT_NE(Hangar("nodes --server " + Https() + " --ca " + other + "/ca.crt", &out), 0);
  EXPECT_TRUE(Contains(out, "no CA you trust")) << out;
  EXPECT_EQ(cluster_->Get("/healthz").size(), 0u)
      << "plaintext HTTP to the HTTPS port gets no answer";
}

}  // namespace
}  // namespace hangar::testing
